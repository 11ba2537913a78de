"""tg-invoke-graph-rag: answer a question from the knowledge graph (graph-rag)."""
import argparse
import sys

from trustgraph.api import AsyncTrustGraph

from .common import RagAnswer, invoke_rag, positive, rag_parser, run

PROG = "tg-invoke-graph-rag"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = rag_parser(PROG, "Answer a question from a collection's knowledge graph: "
                                 "entities near the question, the subgraph around them, "
                                 "then the LLM; the answer is printed as it streams.")
    arguments.add_argument("-e", "--entity-limit", type=positive,
                           help="seed entities to start from (service default 50)")
    arguments.add_argument("--triple-limit", type=positive,
                           help="triples followed per entity per hop (service default 30)")
    arguments.add_argument("-s", "--max-subgraph-size", type=positive,
                           help="most triples given to the LLM (service default 150)")
    arguments.add_argument("-p", "--max-path-length", type=positive,
                           help="hops from a seed entity (service default 2)")
    return arguments.parse_args(argv)


def ask(client: AsyncTrustGraph, args: argparse.Namespace) -> RagAnswer:
    return client.graph_rag(
        args.question, user=args.user, collection=args.collection,
        entity_limit=args.entity_limit, triple_limit=args.triple_limit,
        max_subgraph_size=args.max_subgraph_size, max_path_length=args.max_path_length,
        optimize_query=args.optimize_query, subqueries=args.subqueries,
        streaming=args.streaming, flow=args.flow_id)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, invoke_rag(parse(argv), ask))


if __name__ == "__main__":
    sys.exit(main())
