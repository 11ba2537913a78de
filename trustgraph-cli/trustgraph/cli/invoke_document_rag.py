"""tg-invoke-document-rag: answer a question from the nearest document chunks
(document-rag)."""
import sys

from trustgraph.api import AsyncTrustGraph

from .rag import rag_main

PROG = "tg-invoke-document-rag"
DESCRIPTION = ("Answer a question from a collection's documents: the chunks nearest the "
               "question, then the LLM; the answer is printed as it streams.")
LIMITS: dict[tuple[str, ...], str] = {
    ("-d", "--doc-limit"): "chunks given to the LLM (service default 20)",
}


def main(argv: list[str] | None = None) -> int:
    return rag_main(argv, PROG, DESCRIPTION, AsyncTrustGraph.document_rag, LIMITS)


if __name__ == "__main__":
    sys.exit(main())
