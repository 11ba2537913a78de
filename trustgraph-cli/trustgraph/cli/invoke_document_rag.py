"""tg-invoke-document-rag: answer a question from the nearest document chunks
(document-rag)."""
import argparse
import sys

from trustgraph.api import AsyncTrustGraph

from .common import RagAnswer, invoke_rag, positive, rag_parser, run

PROG = "tg-invoke-document-rag"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = rag_parser(PROG, "Answer a question from a collection's documents: the "
                                 "chunks nearest the question, then the LLM; the answer "
                                 "is printed as it streams.")
    arguments.add_argument("-d", "--doc-limit", type=positive,
                           help="chunks given to the LLM (service default 20)")
    return arguments.parse_args(argv)


def ask(client: AsyncTrustGraph, args: argparse.Namespace) -> RagAnswer:
    return client.document_rag(
        args.question, user=args.user, collection=args.collection, doc_limit=args.doc_limit,
        optimize_query=args.optimize_query, subqueries=args.subqueries,
        streaming=args.streaming, flow=args.flow_id)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, invoke_rag(parse(argv), ask))


if __name__ == "__main__":
    sys.exit(main())
