"""The RAG commands (tg-invoke-graph-rag, tg-invoke-document-rag, tg-invoke-lazy-rag):
each is ``rag_main`` with its client method and its own limits; they share their
options (``rag_parser``) and their output (``invoke_rag``): the sources, when asked,
then the answer as it streams, then (tg-invoke-lazy-rag) the confidence and what is
missing, then the usage on stderr.
"""
import argparse
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from trustgraph.api import Answer, Chunk, LazyResult, Metadata, RagStream, TrustGraphError

from .common import (
    connect,
    parser,
    positive,
    print_stream,
    question_options,
    run,
    scope_options,
    show_usage,
    write,
)

SOURCE_TEXT = 160  # characters of a source's text shown by --show-sources


def rag_parser(prog: str, description: str, rewriting: bool = True
               ) -> argparse.ArgumentParser:
    """The options every RAG command takes (``rewriting``: with --optimize-query and
    --subqueries, for the services that can rewrite the question); each adds its own
    limits."""
    arguments = question_options(scope_options(parser(prog, description)))
    if rewriting:
        arguments.add_argument("--optimize-query", action="store_true",
                               help="let the LLM rewrite the question before retrieval")
        arguments.add_argument("--subqueries", action="store_true",
                               help="let the LLM split the question into sub-questions, "
                                    "retrieving for each")
    arguments.add_argument("--show-sources", action="store_true",
                           help="print the sources (and any rewritten question or "
                                "sub-questions) before the answer")
    arguments.add_argument("--show-usage", action="store_true",
                           help="print tokens in/out and the model to stderr afterwards")
    return arguments


# AsyncTrustGraph.graph_rag or .document_rag: an answer to await, or a stream
RagMethod = Callable[..., RagStream | Coroutine[Any, Any, Answer]]


def rag_main(argv: list[str] | None, prog: str, description: str, method: RagMethod,
             limits: dict[tuple[str, ...], str]) -> int:
    """A RAG command: ``rag_parser``'s options plus its own ``limits`` (flags → help),
    each a whole number of at least 1 passed to ``method`` under its option's name
    (``--doc-limit`` as ``doc_limit``)."""
    arguments = rag_parser(prog, description)
    names = limit_options(arguments, limits)
    args = arguments.parse_args(argv)
    options = {name: getattr(args, name) for name in names}
    return run(prog, invoke_rag(args, method, {
        **options, "optimize_query": args.optimize_query, "subqueries": args.subqueries}))


def limit_options(arguments: argparse.ArgumentParser, limits: dict[tuple[str, ...], str]
                  ) -> list[str]:
    """Add ``limits`` (flags → help), each a whole number of at least 1; their names."""
    return [arguments.add_argument(*flags, type=positive, help=help).dest
            for flags, help in limits.items()]


async def invoke_rag(args: argparse.Namespace, method: RagMethod, options: dict[str, Any]
                     ) -> None:
    """Ask with ``method`` (the client's ``graph_rag``, ``document_rag`` or
    ``lazy_rag``) and its ``options``; print the answer, streamed or whole, and for
    lazy-rag the confidence and what is missing after it."""
    async with connect(args, traced=True) as client:
        reply = method(client, args.question, user=args.user, collection=args.collection,
                       streaming=args.streaming, flow=args.flow_id, **options)
        if isinstance(reply, RagStream):  # asked with streaming
            await print_stream(_answer_text(reply, args.show_sources))
            usage, lazy = reply.usage, reply.lazy
        else:
            answer = await reply
            if args.show_sources:
                print_sources(Metadata(answer.sources, answer.optimized_query,
                                       answer.subqueries))
            if answer:
                print(answer, flush=True)
            usage, lazy = answer.usage, answer.lazy
    if lazy is not None:
        print_lazy(lazy)
    if args.show_usage:
        show_usage(usage)
    if lazy is not None and lazy.summary_error:
        # The answer is missing, though what was retrieved is printed: a failure.
        raise TrustGraphError(lazy.summary_error.get("type") or "error",
                              lazy.summary_error.get("message") or "the summary failed")


def print_lazy(lazy: LazyResult) -> None:
    """After a LazyRAG answer: a blank line, its confidence and what is missing."""
    confidence = "?" if lazy.confidence is None else f"{lazy.confidence:.2f}"
    lines = ["", f"Confidence: {confidence}"]
    if lazy.missing_info:
        lines += ["Missing information:"] + [f"- {item}" for item in lazy.missing_info]
    else:
        lines.append("Missing information: none")
    write("\n".join(lines) + "\n")


async def _answer_text(stream: RagStream, show_sources: bool) -> AsyncIterator[str]:
    async for event in stream:
        if isinstance(event, Chunk):
            yield event.text
        elif isinstance(event, Metadata) and show_sources:
            print_sources(event)


def print_sources(metadata: Metadata) -> None:
    """The sources, numbered, one line each, then a blank line (before the answer)."""
    lines = []
    if metadata.optimized_query:
        lines.append(f"Rewritten question: {metadata.optimized_query}")
    lines += [f"Sub-question: {question}" for question in metadata.subqueries]
    lines.append(f"Sources ({len(metadata.sources)}):")
    lines += [source_line(n, source) for n, source in enumerate(metadata.sources, 1)]
    write("\n".join(lines) + "\n\n")


def source_line(number: int, source: dict[str, Any]) -> str:
    """``[n] title (document) distance [citation]: text``, the text on one line and
    shortened; the citation (author, page range, heading path, chunk number, each
    retriever's score) only as far as the source carries it."""
    where = source.get("title") or source.get("document_id") or source.get("id") or "?"
    if source.get("title") and source.get("document_id"):
        where += f" ({source['document_id']})"
    if source.get("distance") is not None:
        where += f" {source['distance']:.3f}"
    if details := citation(source):
        where += f" [{details}]"
    text = " ".join(str(source.get("text") or "").split())
    if len(text) > SOURCE_TEXT:
        text = text[:SOURCE_TEXT - 1] + "…"
    return f"[{number}] {where}: {text}"


def citation(source: dict[str, Any]) -> str:
    """``by Ada Quill; p. 3-4; § Methods > Sampling; chunk 7; vector 0.812 lexical 7.2``"""
    parts = []
    if source.get("author"):
        parts.append(f"by {source['author']}")
    if pages := source.get("page_range"):
        parts.append(f"p. {pages[0]}" if pages[0] == pages[-1] else f"p. {pages[0]}-{pages[-1]}")
    if source.get("header_titles"):
        parts.append("§ " + " > ".join(source["header_titles"]))
    if source.get("order") is not None:
        parts.append(f"chunk {source['order']}")
    if scores := source.get("scores"):
        parts.append(" ".join(f"{name} {value:.4g}" for name, value in scores.items()))
    return "; ".join(parts)
