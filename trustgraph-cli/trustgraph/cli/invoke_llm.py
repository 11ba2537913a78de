"""tg-invoke-llm: ask the LLM directly (the text-completion service of a flow)."""
import argparse
import sys

from .common import connect, parser, print_stream, run, show_usage

PROG = "tg-invoke-llm"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Send a prompt (and optionally a system prompt) to the "
                             "text-completion service and print the answer as it streams.")
    arguments.usage = f"{PROG} [options] [system] prompt"
    arguments.add_argument("system", nargs="?", default="",
                           help="system prompt (may be omitted)")
    arguments.add_argument("prompt", nargs="?",
                           help="the prompt; read from standard input when not given")
    arguments.add_argument("--no-streaming", dest="streaming", action="store_false",
                           help="wait for the whole answer instead of streaming it")
    arguments.add_argument("--show-usage", action="store_true",
                           help="print tokens in/out and the model to stderr afterwards")
    args = arguments.parse_args(argv)
    if args.prompt is None:  # one positional is the prompt, not the system prompt
        args.prompt, args.system = args.system, ""
    if not args.prompt and not sys.stdin.isatty():
        args.prompt = sys.stdin.read()
    if not args.prompt.strip():
        arguments.error("a prompt is required (as an argument or on standard input)")
    return args


async def invoke(args: argparse.Namespace) -> None:
    async with connect(args, traced=True) as client:
        if args.streaming:
            stream = client.text_completion(args.system, args.prompt, streaming=True,
                                            flow=args.flow_id)
            await print_stream(stream)
            usage = stream.usage
        else:
            answer = await client.text_completion(args.system, args.prompt, flow=args.flow_id)
            print(answer, flush=True)
            usage = answer.usage
    if args.show_usage:
        show_usage(usage)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, invoke(args))


if __name__ == "__main__":
    sys.exit(main())
