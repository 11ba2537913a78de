"""tg-invoke-graph-rag: answer a question from the knowledge graph (graph-rag)."""
import sys

from trustgraph.api import AsyncTrustGraph

from .rag import rag_main

PROG = "tg-invoke-graph-rag"
DESCRIPTION = ("Answer a question from a collection's knowledge graph: entities near the "
               "question, the subgraph around them, then the LLM; the answer is printed "
               "as it streams.")
LIMITS: dict[tuple[str, ...], str] = {
    ("-e", "--entity-limit"): "seed entities to start from (service default 50)",
    ("--triple-limit",): "triples followed per entity per hop (service default 30)",
    ("-s", "--max-subgraph-size"): "most triples given to the LLM (service default 150)",
    ("-p", "--max-path-length"): "hops from a seed entity (service default 2)",
}


def main(argv: list[str] | None = None) -> int:
    return rag_main(argv, PROG, DESCRIPTION, AsyncTrustGraph.graph_rag, LIMITS)


if __name__ == "__main__":
    sys.exit(main())
