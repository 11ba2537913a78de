"""tg-invoke-agent: ask the agent, which reasons in steps and calls tools (agent)."""
import argparse
import json
import os
import sys
from typing import TextIO

from trustgraph.api import (
    AgentAction,
    AgentAnswer,
    AgentEvent,
    AgentFinal,
    AgentObservation,
    AgentStream,
    AgentThought,
)

from .common import connect, parser, positive, question_options, run, scope_options, show_usage

PROG = "tg-invoke-agent"
DESCRIPTION = ("Ask the agent a question. It reasons step by step, calling tools (the "
               "knowledge graph, the documents, prompts, MCP servers) as it needs; the "
               "answer is printed as it streams.")
NEW_SESSION = ""  # --session without an id: the agent starts one and we print it
DIM, PLAIN = "\x1b[2m", "\x1b[0m"
LABELS = {AgentThought: "Thought: ", AgentObservation: "Observation: "}


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = question_options(scope_options(parser(PROG, DESCRIPTION)))
    arguments.add_argument("-v", "--verbose", action="store_true",
                           help="show the agent's thoughts, actions and observations too")
    arguments.add_argument("-p", "--pattern", choices=["react", "ask"],
                           help="react: reason and call tools in a loop; ask: classify, "
                                "retrieve, answer (default: the service's)")
    arguments.add_argument("-g", "--group", action="append",
                           help="offer only the tools of this group (repeat, or separate "
                                "with commas, for several)")
    arguments.add_argument("--session", nargs="?", const=NEW_SESSION, metavar="ID",
                           help="keep the conversation: continue session ID, or without "
                                "an ID start one; the session id is printed to stderr")
    arguments.add_argument("--max-iterations", type=positive,
                           help="most reasoning steps before giving up (service default)")
    arguments.add_argument("--show-usage", action="store_true",
                           help="print tokens in/out and the model to stderr afterwards")
    return arguments.parse_args(argv)


def groups(values: list[str] | None) -> list[str] | None:
    """``-g a -g b,c`` → ``["a", "b", "c"]``; None when no group was named."""
    if not values:
        return None
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


class DialogPrinter:
    """Writes a dialog's events as they come: the answer, and with ``verbose`` each
    thought, action and observation labelled on lines of its own (dimmed on a
    terminal, so the answer stands out)."""

    def __init__(self, out: TextIO, verbose: bool, dim: bool) -> None:
        self._out = out
        self._verbose = verbose
        self._dim = dim
        self._open: type | None = None  # the kind of message whose line is unfinished
        self._at_line_start = True

    def show(self, event: AgentEvent) -> None:
        if isinstance(event, AgentAnswer):
            self._piece(AgentAnswer, "", event.text, event.end_of_message, dim=False)
        elif not self._verbose or isinstance(event, AgentFinal):
            return
        elif isinstance(event, AgentAction):
            self.finish()
            arguments = json.dumps(event.arguments, ensure_ascii=False)
            self._write(f"Action: {event.tool} {arguments}\n", dim=True)
        else:
            self._piece(type(event), LABELS[type(event)], event.text, event.end_of_message,
                        dim=True)

    def finish(self) -> None:
        """End the unfinished line, if any."""
        if not self._at_line_start:
            self._write("\n", dim=False)
        self._open = None

    def _piece(self, kind: type, label: str, text: str, end: bool, dim: bool) -> None:
        if self._open is not kind:
            self.finish()
            self._open = kind
            text = label + text
        self._write(text, dim)
        if end:
            self.finish()

    def _write(self, text: str, dim: bool) -> None:
        if not text:
            return
        self._out.write(f"{DIM}{text}{PLAIN}" if dim and self._dim else text)
        self._out.flush()
        self._at_line_start = text.endswith("\n")


async def invoke(args: argparse.Namespace) -> None:
    printer = DialogPrinter(sys.stdout, args.verbose,
                            dim=sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    async with connect(args, traced=True) as client:
        # Without streaming the agent sends the answer alone; to show the steps too,
        # ask for the stream and print it once it is whole.
        reply = client.agent(
            args.question, user=args.user, collection=args.collection,
            streaming=args.streaming or args.verbose, session_id=args.session or None,
            group=groups(args.group), pattern=args.pattern,
            max_iterations=args.max_iterations, flow=args.flow_id)
        try:
            if args.streaming and isinstance(reply, AgentStream):
                async for event in reply:
                    printer.show(event)
                final = reply.final or AgentFinal(reply.usage)
            else:
                result = await (reply.collect() if isinstance(reply, AgentStream) else reply)
                for event in (*result.steps, AgentAnswer(result, True)):
                    printer.show(event)
                final = AgentFinal(result.usage, result.session_id)
        finally:
            printer.finish()
    if args.session is not None:
        print(f"Session: {final.session_id or args.session}", file=sys.stderr, flush=True)
    if args.show_usage:
        show_usage(final.usage)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, invoke(args))


if __name__ == "__main__":
    sys.exit(main())
