"""tg-invoke-lazy-rag: answer a question from the part of the knowledge graph it
touches, summarised at query time (lazy-rag), with the confidence and what is missing."""
import sys

from trustgraph.api import AsyncTrustGraph

from .common import run
from .rag import invoke_rag, limit_options, rag_parser

PROG = "tg-invoke-lazy-rag"
DESCRIPTION = ("Answer a question from a collection's knowledge graph, LazyRAG's way: the "
               "entities it names, the subgraph around them and their communities, "
               "summarised by the LLM now (nothing summarised at load time). The answer is "
               "printed as it streams, then the confidence and what the graph is missing.")
LIMITS: dict[tuple[str, ...], str] = {
    ("--max-hops",): "hops from a seed entity, 1-5 (service default LAZY_RAG_MAX_HOPS, 2)",
    ("--max-entities",): "most entities summarised, 1-200 (service default "
                         "LAZY_RAG_MAX_ENTITIES, 50)",
}


def main(argv: list[str] | None = None) -> int:
    arguments = rag_parser(PROG, DESCRIPTION, rewriting=False)
    names = limit_options(arguments, LIMITS)
    arguments.add_argument("--no-communities", action="store_true",
                           help="leave out community context (service default "
                                "LAZY_RAG_USE_COMMUNITIES)")
    args = arguments.parse_args(argv)
    options = {name: getattr(args, name) for name in names}
    if args.no_communities:
        options["use_communities"] = False
    return run(PROG, invoke_rag(args, AsyncTrustGraph.lazy_rag, options))


if __name__ == "__main__":
    sys.exit(main())
