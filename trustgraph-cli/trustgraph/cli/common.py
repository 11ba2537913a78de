"""What every tg-* command shares: the connection options, and running a command
so that a failure is one line on stderr and a non-zero exit, never a traceback.

A command is ``main(argv) -> int``: parse with ``parser(...)`` (which adds
``-u/--url``, ``-t/--token`` and, for flow services, ``-f/--flow-id``), then
``return run(prog, coroutine)`` where the coroutine uses ``connect(args)``. Each RAG
command is ``rag_main`` with its client method and its own limits; they share their
options (``rag_parser``) and their output (``invoke_rag``): the sources, when asked,
then the answer as it streams, then (tg-invoke-lazy-rag) the confidence and what is
missing, then the usage on stderr.
"""
import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine
from typing import Any

from trustgraph.api import (DEFAULT_URL, Answer, AsyncTrustGraph, Chunk, LazyResult, Metadata,
                            RagStream, TrustGraphError, Usage)

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by Ctrl-C (128 + SIGINT)


def parser(prog: str, description: str, flow: bool = True) -> argparse.ArgumentParser:
    """An argument parser with the connection options every command takes."""
    result = argparse.ArgumentParser(prog=prog, description=description)
    result.add_argument("-u", "--url", default=os.environ.get("TRUSTGRAPH_URL") or DEFAULT_URL,
                        help="gateway URL (env TRUSTGRAPH_URL; default %(default)s)")
    result.add_argument("-t", "--token", default=os.environ.get("TRUSTGRAPH_TOKEN") or None,
                        help="gateway token (env TRUSTGRAPH_TOKEN)")
    if flow:
        result.add_argument("-f", "--flow-id", default="default",
                            help="flow to use (default %(default)s)")
    return result


def scope_options(arguments: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``-U/--user`` and ``-C/--collection``: whose data, and which collection of it."""
    arguments.add_argument("-U", "--user", default="trustgraph",
                           help="user (tenant) the data belongs to (default %(default)s)")
    arguments.add_argument("-C", "--collection", default="default",
                           help="collection within the user's data (default %(default)s)")
    return arguments


def connect(args: argparse.Namespace) -> AsyncTrustGraph:
    return AsyncTrustGraph(args.url, args.token)


def run(prog: str, command: Coroutine[Any, Any, Any]) -> int:
    """Run ``command``; report a failure as ``prog: type: message`` on stderr."""
    try:
        asyncio.run(command)
    except TrustGraphError as error:
        return fail(prog, error.type, error.message)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED  # asyncio.run cancelled the command, which cancels its requests
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): stop quietly, and keep
        # Python from complaining again while flushing at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Exception as error:  # a bug or an unforeseen failure: still one line
        return fail(prog, "error", f"{type(error).__name__}: {error}")
    return 0


def fail(prog: str, kind: str, message: str) -> int:
    one_line = " ".join(str(message).split())
    print(f"{prog}: {kind}: {one_line}", file=sys.stderr, flush=True)
    return EXIT_ERROR


def write(text: str) -> None:
    """Print a piece of a streamed answer now."""
    sys.stdout.write(text)
    sys.stdout.flush()


async def print_stream(stream: AsyncIterable[str]) -> None:
    """Print text deltas as they arrive, ending the line afterwards."""
    last = ""
    try:
        async for last in stream:
            write(last)
    finally:
        if last and not last.endswith("\n"):
            write("\n")


def print_json(value: Any) -> None:
    """A JSON value on stdout, indented for people, non-ASCII kept as it is."""
    print(json.dumps(value, indent=2, ensure_ascii=False), flush=True)


def show_usage(usage: Usage) -> None:
    """Tokens in and out and the model, on stderr (``?`` where the service did not say)."""
    def shown(value: object) -> object:
        return "?" if value is None else value

    print(f"Input tokens: {shown(usage.in_token)}  Output tokens: {shown(usage.out_token)}"
          f"  Model: {shown(usage.model)}", file=sys.stderr, flush=True)


# The RAG commands (tg-invoke-graph-rag, tg-invoke-document-rag, tg-invoke-lazy-rag)

SOURCE_TEXT = 160  # characters of a source's text shown by --show-sources


def rag_parser(prog: str, description: str, rewriting: bool = True
               ) -> argparse.ArgumentParser:
    """The options every RAG command takes (``rewriting``: with --optimize-query and
    --subqueries, for the services that can rewrite the question); each adds its own
    limits."""
    arguments = scope_options(parser(prog, description))
    arguments.add_argument("-q", "--question", required=True, help="the question to answer")
    streaming = arguments.add_mutually_exclusive_group()
    streaming.add_argument("--streaming", dest="streaming", action="store_true", default=True,
                           help="print the answer as it streams (the default)")
    streaming.add_argument("--no-streaming", dest="streaming", action="store_false",
                           help="wait for the whole answer instead of streaming it")
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


def positive(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1 (a limit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


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
    async with connect(args) as client:
        reply = method(client, args.question, user=args.user, collection=args.collection,
                       streaming=args.streaming, flow=args.flow_id, **options)
        if args.streaming:
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
    """``[n] title (document) distance: text``, the text on one line and shortened."""
    where = source.get("title") or source.get("document_id") or source.get("id") or "?"
    if source.get("title") and source.get("document_id"):
        where += f" ({source['document_id']})"
    if source.get("distance") is not None:
        where += f" {source['distance']:.3f}"
    text = " ".join(str(source.get("text") or "").split())
    if len(text) > SOURCE_TEXT:
        text = text[:SOURCE_TEXT - 1] + "…"
    return f"[{number}] {where}: {text}"
