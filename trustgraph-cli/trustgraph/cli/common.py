"""What every tg-* command shares: the connection options, and running a command
so that a failure is one line on stderr and a non-zero exit, never a traceback.

A command is ``main(argv) -> int``: parse with ``parser(...)`` (which adds
``-u/--url``, ``-t/--token``, ``-w/--workspace`` and, for flow services,
``-f/--flow-id``), then
``return run(prog, coroutine)`` where the coroutine uses ``connect(args)``. The RAG
commands share more: ``cli/rag.py``.
"""
import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterable, Callable, Coroutine, Sequence
from typing import Any

from trustgraph.api import DEFAULT_URL, AsyncTrustGraph, TrustGraphError, Usage

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by Ctrl-C (128 + SIGINT)


def parser(prog: str, description: str, flow: bool = True,
           token_short: bool = True) -> argparse.ArgumentParser:
    """An argument parser with the connection options every command takes (also as
    TrustGraph's commands spell them: ``--api-url``, ``-w/--workspace``).
    ``token_short`` false: ``-t`` is the command's own (TrustGraph's tags), the token
    is ``--token`` only."""
    result = argparse.ArgumentParser(prog=prog, description=description)
    result.add_argument("-u", "--url", "--api-url", dest="url",
                        default=os.environ.get("TRUSTGRAPH_URL") or DEFAULT_URL,
                        help="gateway URL (env TRUSTGRAPH_URL; default %(default)s)")
    result.add_argument(*(("-t", "--token") if token_short else ("--token",)),
                        default=os.environ.get("TRUSTGRAPH_TOKEN") or None,
                        help="gateway token (env TRUSTGRAPH_TOKEN)")
    result.add_argument("-w", "--workspace", default=None, help=(
        "accepted as TrustGraph's commands take it; the token decides whose data "
        "(an admin's names another user with -U/--user where a command has it)"))
    if flow:
        result.add_argument("-f", "--flow-id", default="default",
                            help="flow to use (default %(default)s)")
    return result


def scope_options(arguments: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``-U/--user`` and ``-C/--collection``: whose data, and which collection of it."""
    arguments.add_argument("-U", "--user", default=None,
                           help="user (tenant) the data belongs to (default: the key's "
                                "user; another user's needs an admin's key)")
    arguments.add_argument("-C", "--collection", default="default",
                           help="collection within the user's data (default %(default)s)")
    return arguments


def question_options(arguments: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``-q/--question``, and ``--streaming`` (the default) or ``--no-streaming``."""
    arguments.add_argument("-q", "--question", required=True, help="the question to answer")
    streaming = arguments.add_mutually_exclusive_group()
    streaming.add_argument("--streaming", dest="streaming", action="store_true", default=True,
                           help="print the answer as it streams (the default)")
    streaming.add_argument("--no-streaming", dest="streaming", action="store_false",
                           help="wait for the whole answer instead of streaming it")
    return arguments


def positive(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1 (a limit, a count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def connect(args: argparse.Namespace, traced: bool = False) -> AsyncTrustGraph:
    """``traced``: the gateway keeps the trace of each request (a question, whose
    explanation tg-show-explain-trace then reads), whatever share it samples."""
    return AsyncTrustGraph(args.url, args.token, traced=traced)


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


def columns(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """``header`` and ``rows`` in columns padded to their widest cell; the last
    column is not padded."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in
                               zip(row, widths, strict=True)).rstrip()
                     for row in [header, *rows])


def print_listing(found: list, as_json: bool, empty: str,
                  render: Callable[[list], str]) -> None:
    """A listing: as JSON, else ``empty`` when there is nothing, else ``render``'s
    text."""
    if as_json:
        print_json(found)
    else:
        print(render(found) if found else empty, flush=True)


def show_usage(usage: Usage) -> None:
    """Tokens in and out and the model, on stderr (``?`` where the service did not say)."""
    def shown(value: object) -> object:
        return "?" if value is None else value

    print(f"Input tokens: {shown(usage.in_token)}  Output tokens: {shown(usage.out_token)}"
          f"  Model: {shown(usage.model)}", file=sys.stderr, flush=True)
