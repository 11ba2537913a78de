"""Local LLM servers for tests: the script (what to answer, how fast, how to fail)
is common; each provider's server module supplies only its wire format.

A request steers its own answer with a directive anywhere in its prompt text, e.g.
``[tokens=2000 delay=0 first=0.2 fail_after=5 drop_after=7 status=429 fail_times=2]``:
tokens: how many tokens (``tok0 tok1 ...``); first / delay: seconds before the first
token and between tokens; fail_after: an in-stream error after N tokens; drop_after:
cut the connection after N tokens; garble_after: a line of malformed JSON after N
tokens, then the connection held open, silent; status: answer with that HTTP status
instead (only the first ``fail_times`` such requests when given, then normally).

A test that needs particular words (an agent's step, an answer under a schema) sets
``server.reply``: a function of the prompt text returning the answer for that
request, or None for the scripted tokens. The answer is streamed a word at a time
(``words``), with the directive's timing and failures; a request that asks for a
JSON Schema in the format's own way is answered where that format puts such an
answer (Anthropic's and Bedrock's forced tool: the tool's input), whatever the reply
says, so a test can send an off-schema answer.
"""
import asyncio
import re
import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace

from aiohttp import web

DIRECTIVE = re.compile(r"\[([a-z_]+=[^\]]*)\]")
WORD = re.compile(r"\s*\S+\s*|\s+")
PROMPT_TOKENS = 11  # every scripted server reports this many input tokens
_INTS = {"tokens", "fail_after", "drop_after", "garble_after", "status", "fail_times"}


@dataclass
class Script:
    tokens: int = 5
    first: float = 0.0
    delay: float = 0.0
    fail_after: int | None = None
    drop_after: int | None = None
    garble_after: int | None = None
    status: int = 200
    fail_times: int | None = None

    def updated(self, text: str) -> "Script":
        match = DIRECTIVE.search(text)
        if not match:
            return self
        try:
            values = dict(item.split("=", 1) for item in match.group(1).split())
            return replace(self, **{k: (int if k in _INTS else float)(v)
                                    for k, v in values.items()})
        except (ValueError, TypeError):
            return self  # text that only looks like a directive (fuzzed input) is text


@dataclass
class Call:
    """One request as the server saw it; times are ``time.perf_counter()`` (one clock
    for every thread of a process, so a benchmark can line them up with its own)."""

    prompt: str
    arrived: float
    written: list[float] = field(default_factory=list)  # when each token was sent
    done: float | None = None  # when the answer was complete


@dataclass
class Stats:
    requests: int = 0
    open_streams: int = 0
    statuses_sent: int = 0
    closed_early: list[float] = field(default_factory=list)  # when a client left mid-stream


async def answered(provider, system: str, prompt: str, options=None):
    """A ``Retrying`` provider's answer as one stream, read as the text-completion
    service reads it: the first piece (retried while overloaded), then the provider's
    own generator; closing this closes that generator (its HTTP stream). ``options``:
    what the request asks besides its text (default: nothing, the settings apply)."""
    from trustgraph.model.text_completion.provider import Options

    first, rest = await provider.start(system, prompt, options or Options())
    async with aclosing(rest):
        if first is not None:
            yield first
        async for piece in rest:
            yield piece


async def collect(stream) -> tuple[list, object]:
    """A provider's stream read to its end: (text pieces, the final ``Usage``)."""
    from trustgraph.model.text_completion.provider import Usage

    pieces, usage = [], None
    async for piece in stream:
        if isinstance(piece, Usage):
            usage = piece
        else:
            pieces.append(piece)
    return pieces, usage


async def collect_text(stream) -> tuple[str, object]:
    """As ``collect``, with the pieces joined into the answer."""
    pieces, usage = await collect(stream)
    return "".join(pieces), usage


def token(i: int) -> str:
    return f"tok{i} "


def expected_text(tokens: int) -> str:
    return "".join(token(i) for i in range(tokens))


def words(text: str) -> list[str]:
    """How a scripted reply is streamed: a word (with the spaces after it) at a time."""
    return WORD.findall(text)


class ScriptedServer:
    """Subclasses set ``model`` and implement the hooks below for their format."""

    model = "fake-model"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.stats = Stats()
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.disconnected = asyncio.Event()
        self.last_body: dict | None = None
        self.last_headers: dict | None = None
        self.reply: Callable[[str], str | None] | None = None
        self.arrivals: list[Call] = []  # every request, in the order they arrived

    # --- hooks for a wire format -------------------------------------------------
    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def prompt_text(self, body: dict) -> str:
        raise NotImplementedError

    def options(self, body: dict) -> dict:
        """What a request asked besides its text, as it was sent: its ``model``,
        ``max_tokens``, ``temperature`` and ``stop`` (the provider ``Options``
        names), None where it sent none."""
        raise NotImplementedError

    def shape(self, body: dict) -> dict | None:
        """The JSON Schema a request asked the answer to match, read the way this
        server reads it: ``{"mechanism": <where it was>, "schema": <it>}``, or None."""
        raise NotImplementedError

    def wants_stream(self, body: dict) -> bool:
        raise NotImplementedError

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response({"error": {"message": message}}, status=status)

    def completion(self, text: str, script: Script) -> web.Response:
        raise NotImplementedError

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        raise NotImplementedError

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        raise NotImplementedError

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        raise NotImplementedError

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        raise NotImplementedError

    # --- common behaviour ---------------------------------------------------------
    def asked(self) -> dict:
        """What the last request asked besides its text (``options``), and its
        ``schema`` (``shape``)."""
        body = self.last_body or {}
        return {**self.options(body), "schema": self.shape(body)}

    @property
    def prompts(self) -> list[str]:
        """Every prompt text, in the order the requests arrived."""
        return [call.prompt for call in self.arrivals]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> "ScriptedServer":
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.routes(app)
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()

    async def handle(self, request: web.Request, body: dict | None = None) -> web.StreamResponse:
        """Answer one request; ``body`` when the format parsed it already."""
        body = body if body is not None else await request.json()
        self.stats.requests += 1
        self.last_body, self.last_headers = body, dict(request.headers)
        text = self.prompt_text(body)
        call = Call(text, time.perf_counter())
        self.arrivals.append(call)
        script = self.script.updated(text)
        reply = self.reply(text) if self.reply is not None else None
        pieces = words(reply) if reply is not None else \
            [token(i) for i in range(script.tokens)]
        script = replace(script, tokens=len(pieces))
        if script.status != 200 and (script.fail_times is None
                                     or self.stats.statuses_sent < script.fail_times):
            self.stats.statuses_sent += 1
            return self.error_response(script.status, f"scripted {script.status}")
        if not self.wants_stream(body):
            await asyncio.sleep(script.first + script.delay * max(script.tokens - 1, 0))
            call.done = time.perf_counter()
            return self.completion("".join(pieces), script)
        return await self._stream(request, body, script, pieces, call)

    async def _stream(self, request: web.Request, body: dict, script: Script,
                      pieces: list[str], call: Call) -> web.StreamResponse:
        response = await self.open_stream(request, body)
        self.stats.open_streams += 1
        finished = False
        try:
            clock = asyncio.get_running_loop().time
            started = clock()
            await asyncio.sleep(script.first)
            for i in range(script.tokens):
                if i and script.delay:
                    # Each token at its own time from the request, as a remote model's:
                    # when this process is starved of CPU (it shares the machine with
                    # the stack under test), a late wake-up is made up, not added to
                    # every later token of the stream.
                    await asyncio.sleep(max(0.0, started + script.first + i * script.delay
                                            - clock()))
                if script.fail_after is not None and i == script.fail_after:
                    await self.write_error(response, "scripted failure")
                    finished = True
                    return response
                if script.garble_after is not None and i == script.garble_after:
                    # Truncated JSON in the format's own framing ("data: " for SSE is
                    # still bad JSON after it); then silence: only the reader's parse
                    # can end this request quickly.
                    await response.write(b'data: {"choices": [{"delta": {"content": "tok\n\n')
                    await asyncio.Event().wait()
                if script.drop_after is not None and i == script.drop_after:
                    request.transport.close()
                    finished = True
                    return response
                await self.write_token(response, pieces[i])
                call.written.append(time.perf_counter())
            await self.write_end(response, body, script)
            call.done = time.perf_counter()
            finished = True
            return response
        finally:
            self.stats.open_streams -= 1
            if not finished:
                self.stats.closed_early.append(time.monotonic())
                self.disconnected.set()


def serve(server_class: type[ScriptedServer]) -> None:
    """``python -m tests.support.<x>_server --port P [--tokens N --first S --delay S]``:
    serve one format in a process of its own (benchmarks, manual runs)."""
    import argparse

    parser = argparse.ArgumentParser(description=serve.__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--first", type=float, default=0.2)
    parser.add_argument("--delay", type=float, default=0.01)
    args = parser.parse_args()

    async def run() -> None:
        server = await server_class(Script(tokens=args.tokens, first=args.first,
                                           delay=args.delay)).start(args.port)
        print(f"listening {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())
