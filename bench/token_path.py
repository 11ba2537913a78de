"""``python -m bench.token_path``: the project files one streamed token crosses, from
the LLM provider to the gateway's websocket write, and what is done to it on the way.

Everything runs in this one process and event loop, on a real pulsar-lite broker:
the gateway, the processors of the answer path (with the retrieval services they
call scripted to find nothing, so the answer starts at once) and, on a thread of its
own, a scripted OpenAI-format LLM that writes one word every ``--delay`` seconds.
Two layouts: ``group`` runs the processors as ``tg-start`` does, in one process
group (prompt + text-completion + RAG + agent calling each other in-process), and
``bus`` gives each processor a bus of its own, so every hop crosses the broker.

A profile hook (``sys.setprofile``, this thread only) notes every call into a
project file (function calls and generator or coroutine resumptions alike) and every
record built, encoded or decoded. A word's journey is what runs from the provider's
read of it to its next read (words come ``--delay`` apart, a journey takes a few
ms); the figures are taken over the middle words of the answer: the files present
in most of them (and their lines), the async generator frames resumed, and per word
the records built (pydantic models constructed or copied; ``Delta`` objects
apart), JSON encodes (records, or a delta's text) and JSON decodes, outside the
provider's own parse of the LLM's event (and this script's client). It also counts
the project's forwarding generators (``async for x in y: yield x``).

    python -m bench.token_path                       # every service, both layouts
    python -m bench.token_path --service graph-rag --layout bus --files
"""
import argparse
import ast
import asyncio
import inspect
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

import trustgraph
from tests.support.agent_llm import AgentReplies, final
from tests.support.openai_server import OpenAiServer
from tests.support.scripted_llm import Script
from tests.support.stack import openai_server_thread
from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec, Service
from trustgraph.pubsub.embedded import EmbeddedBroker, free_port
from trustgraph.schema import (
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    LexicalSearchRequest,
    SubgraphRequest,
    SubgraphResponse,
)

SERVICES = ("text-completion", "prompt", "document-rag", "graph-rag", "lazy-rag", "agent")
LAYOUTS = ("group", "bus")
GAP = 0.04  # seconds of quiet before a read of the LLM's stream that starts a word
# Where the openai provider reads its stream (lines.py until it moved into the provider).
READS = ("text_completion/lines.py", "text_completion/openai/provider.py")
DELTA_HOME = os.path.join("base", "relay.py")  # ``Delta``: a token between in-process hops
QUESTION = "what do we know about the rockets?"
ANSWER_WORDS = 24
# The processors each service's answer path needs, besides config and the scripted stores.
PATHS = {
    "text-completion": ["text-completion"],
    "prompt": ["prompt", "text-completion"],
    "document-rag": ["prompt", "text-completion", "document-rag"],
    "graph-rag": ["prompt", "text-completion", "graph-rag"],
    "lazy-rag": ["prompt", "text-completion", "lazy-rag"],
    "agent": ["prompt", "text-completion", "agent"],
}
ROOTS = tuple(str(Path(p).resolve()) + os.sep for p in trustgraph.__path__)


def request_for(service: str, words: int, delay: float) -> dict:
    directive = f"[tokens={words} first=0 delay={delay}]"
    question = f"{directive} {QUESTION}"
    return {
        "text-completion": {"system": "", "prompt": question, "streaming": True},
        "prompt": {"id": "document-prompt", "streaming": True,
                   "variables": {"query": question, "documents": []}},
        "document-rag": {"query": question, "streaming": True},
        "graph-rag": {"query": question, "streaming": True},
        "lazy-rag": {"query": question, "streaming": True, "use_communities": False},
        "agent": {"question": QUESTION, "streaming": True, "pattern": "react"},
    }[service]


# -- the scripted stores: every retrieval finds nothing -------------------------------

async def _vectors(request: EmbeddingsRequest, ctx) -> EmbeddingsResponse:
    return EmbeddingsResponse(vectors=[[0.1] * 8 for _ in request.texts or [""]],
                              end_of_stream=True)


async def _no_entities(request, ctx) -> GraphEmbeddingsResponse:
    return GraphEmbeddingsResponse(entities=[], end_of_stream=True)


async def _no_chunks(request, ctx) -> DocumentEmbeddingsResponse:
    return DocumentEmbeddingsResponse(chunks=[], end_of_stream=True)


async def _no_subgraph(request, ctx) -> SubgraphResponse:
    return SubgraphResponse(triples=[], labels={}, end_of_stream=True)


STORES = ProcessorSpec("scripted-stores", ProcessorSettings, lambda runtime: [
    Service("embeddings", EmbeddingsRequest, EmbeddingsResponse, _vectors),
    Service("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, _no_entities),
    Service("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
            _no_chunks),
    Service("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse, _no_chunks),
    Service("subgraph", SubgraphRequest, SubgraphResponse, _no_subgraph),
])


def spec_and_settings(name: str, common: dict, llm_url: str):
    from trustgraph.run.registry import spec_of
    spec = spec_of("text-completion-openai" if name == "text-completion" else name, [])
    extra = {"openai_base_url": llm_url, "tg_llm_retries": 0} \
        if name == "text-completion" else {}
    if name in ("prompt", "agent"):
        extra["tg_config_wait"] = 5.0
    return spec, spec.settings(**common, **extra)


# -- the trace --------------------------------------------------------------------------

@dataclass
class Event:
    at: float
    file: str  # project file (relative), or "" for a record operation
    what: str  # "call", "agen" (an async generator resumed), "build", "encode", "decode"
    where: str = ""  # the project file a record operation was asked by


@dataclass
class Trace:
    events: list[Event] = field(default_factory=list)
    on: bool = False

    def hook(self, frame, event, arg) -> None:
        if not self.on:
            return
        if event == "call":
            filename = frame.f_code.co_filename
            if filename.startswith(ROOTS):
                what = "agen" if frame.f_code.co_flags & inspect.CO_ASYNC_GENERATOR else \
                    "delta" if frame.f_code.co_name == "__init__" and \
                    filename.endswith(DELTA_HOME) else "call"
                self.events.append(Event(time.perf_counter(), _relative(filename), what))
                return
            operation = _python_operation(frame)
            if operation:
                self.events.append(Event(time.perf_counter(), "", operation,
                                         _asked_by(frame.f_back)))
        elif event == "c_call":
            operation = _c_operation(arg)
            if operation:
                self.events.append(Event(time.perf_counter(), "", operation, _asked_by(frame)))


def _relative(filename: str) -> str:
    for root in ROOTS:
        if filename.startswith(root):
            distribution = Path(root).parent.name  # trustgraph-base / trustgraph-flow
            return f"{distribution}/trustgraph/{filename[len(root):]}"
    return filename


def _python_operation(frame) -> str:
    code = frame.f_code
    if code.co_filename.endswith(os.path.join("pydantic", "main.py")):
        if code.co_name in ("__init__", "model_copy", "model_construct"):
            return "build"
        if code.co_name == "model_dump_json":
            return "encode"
        if code.co_name == "model_validate_json":
            return "decode"
    elif code.co_filename.endswith(os.path.join("json", "__init__.py")):
        if code.co_name == "dumps":
            return "encode"
        if code.co_name == "loads":
            return "decode"
    return ""


def _c_operation(function) -> str:
    module = getattr(function, "__module__", "") or ""
    name = getattr(function, "__name__", "")
    if module.startswith("pydantic_core"):
        return {"to_json": "encode", "from_json": "decode"}.get(name, "")
    if module == "orjson":
        return {"dumps": "encode", "loads": "decode"}.get(name, "")
    return ""


def _asked_by(frame) -> str:
    while frame is not None:
        if frame.f_code.co_filename.startswith(ROOTS):
            return _relative(frame.f_code.co_filename)
        frame = frame.f_back
    return "?"


def words_of(events: list[Event]) -> list[list[Event]]:
    """The events from each read of the LLM's stream up to the next: one word's
    journey (words come ``--delay`` apart, a journey takes a few ms), plus whatever
    ran meanwhile that had nothing to do with it (a keep-alive, a timer). A read
    starts a burst of calls after a quiet ``GAP`` (the task resumes its outermost
    frame first, the provider's read last)."""
    words: list[list[Event]] = []
    burst: list[Event] = []
    for event in [*events, None]:
        if event is None or (burst and event.at - burst[-1].at >= GAP):
            if any(e.file.endswith(READS) for e in burst):
                words.append(burst)
            elif words:
                words[-1].extend(burst)
            burst = []
        if event is not None:
            burst.append(event)
    return words


def forwarders() -> list[str]:
    """Every ``async for x in y: yield x`` in the project's code: a generator layer
    that only forwards."""
    found = []
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.AsyncFor) and len(node.body) == 1 \
                        and isinstance(node.body[0], ast.Expr) \
                        and isinstance(node.body[0].value, ast.Yield) \
                        and isinstance(node.target, ast.Name) \
                        and isinstance(node.body[0].value.value, ast.Name) \
                        and node.body[0].value.value.id == node.target.id:
                    found.append(f"{_relative(str(path))}:{node.lineno}")
    return found


def lines_of(relative: str) -> int:
    distribution, rest = relative.split("/", 1)
    for root in ROOTS:
        if Path(root).parent.name == distribution:
            return len((Path(root).parent / rest).read_text().splitlines())
    return 0


def figures(events: list[Event]) -> dict:
    """Over the words of the answer's second and third quarter."""
    words = words_of(events)
    middle = words[len(words) // 4: max(len(words) // 4 + 1, 3 * len(words) // 4)]
    if not middle:
        return {"words": len(words)}
    # In most of them: a word whose journey ran late (a loaded machine) has part of it
    # in the next word's window, and a keep-alive may fall in any one.
    seen = Counter(f for word in middle for f in {e.file for e in word if e.file})
    files = {f for f, count in seen.items() if count * 2 > len(middle)}
    per_word: Counter = Counter()
    asked: Counter = Counter()
    for word in middle:
        for event in word:
            if event.what in ("build", "encode", "decode") and event.where != "?" and \
                    not (event.what == "decode" and "/provider.py" in event.where):
                per_word[event.what] += 1
                asked[(event.what, event.where)] += 1
            elif event.what == "agen":
                per_word["generator resumptions"] += 1
            elif event.what == "delta":
                per_word["delta"] += 1
    n = len(middle)
    return {
        "words": len(words), "measured": n,
        "files": len(files), "lines": sum(lines_of(f) for f in files),
        "records built": per_word["build"] / n, "encodes": per_word["encode"] / n,
        "decodes": per_word["decode"] / n, "deltas built": per_word["delta"] / n,
        "async generator resumptions": per_word["generator resumptions"] / n,
        "file list": sorted(files),
        "operations by file": {f"{what} {where}": count / n
                               for (what, where), count in sorted(asked.items())},
    }


# -- one run ----------------------------------------------------------------------------

async def run(service: str, layout: str, broker_url: str, llm: OpenAiServer, data_dir: str,
              words: int, delay: float, trace: Trace) -> dict:
    from trustgraph.gateway.app import Gateway, GatewaySettings

    flow = f"trace-{uuid.uuid4().hex[:6]}"
    common = {"pulsar_url": broker_url, "tg_data_dir": data_dir, "tg_flows": [flow],
              "tg_log_level": "WARNING"}
    config_spec, config_settings = spec_and_settings("config", common, llm.base_url)
    config = Processor(config_spec, config_settings)
    await config.start()
    stores = Processor(STORES, ProcessorSettings(**common))
    await stores.start()
    path = [Processor(*spec_and_settings(name, common, llm.base_url))
            for name in PATHS[service]]
    if layout == "group":
        from trustgraph.base.processor import start_together
        await start_together(path)
    else:
        for processor in path:
            await processor.start()
    gateway = Gateway(GatewaySettings(pulsar_url=broker_url, tg_gateway_host="127.0.0.1",
                                      tg_gateway_port=free_port(), tg_flows=[flow]))
    url = await gateway.start()
    try:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                f"{url.replace('http', 'ws', 1)}api/v1/socket") as socket:
            await ask(socket, service, flow, request_for(service, 2, 0))  # warm
            trace.events.clear()
            trace.on = True
            frames = await ask(socket, service, flow, request_for(service, words, delay))
            trace.on = False
    finally:
        trace.on = False
        await gateway.stop()
        for processor in [*path, stores, config]:
            await processor.stop()
    result = figures(trace.events)
    result["frames"] = frames
    return result


async def ask(socket, service: str, flow: str, request: dict) -> int:
    await socket.send_str(json.dumps({"id": "q", "service": service, "flow": flow,
                                      "request": request}))
    frames = 0
    while True:
        frame = json.loads((await socket.receive()).data)
        frames += 1
        if "error" in frame or (frame.get("response") or {}).get("error"):
            raise RuntimeError(f"{service}: {frame}")
        if frame.get("complete"):
            return frames


def agent_replies(words: int) -> Callable[[str], str | None]:
    replies = AgentReplies()
    answer = " ".join(f"word{i}" for i in range(words))
    replies.react[QUESTION] = [final("I know this one", answer)]
    return replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--service", action="append", choices=SERVICES)
    parser.add_argument("--layout", action="append", choices=LAYOUTS)
    parser.add_argument("--words", type=int, default=ANSWER_WORDS)
    parser.add_argument("--delay", type=float, default=0.25)
    parser.add_argument("--files", action="store_true", help="list the files crossed")
    parser.add_argument("--json", action="store_true", help="one JSON object per run")
    args = parser.parse_args()
    found = forwarders()
    print(f"forwarding generators (async for x in y: yield x): {len(found)}"
          + "".join(f"\n    {where}" for where in found), flush=True)
    trace = Trace()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tg-trace-") as data_dir:
        broker = EmbeddedBroker(Path(data_dir) / "broker", port=free_port())
        broker.start()
        try:
            with openai_server_thread(Script(tokens=args.words, delay=args.delay)) as llm:
                llm.reply = agent_replies(args.words)
                sys.setprofile(trace.hook)
                try:
                    for service in args.service or SERVICES:
                        for layout in args.layout or LAYOUTS:
                            result = asyncio.run(run(
                                service, layout, broker.url, llm,
                                str(Path(data_dir) / f"{service}-{layout}"),
                                args.words, args.delay, trace))
                            rows.append({"service": service, "layout": layout, **result})
                            print(json.dumps(rows[-1]) if args.json else
                                  _line(rows[-1], args.files), flush=True)
                finally:
                    sys.setprofile(None)
        finally:
            broker.stop()


def _line(row: dict, files: bool) -> str:
    if "files" not in row:
        return f"{row['service']:16} {row['layout']:5}  no words measured ({row})"
    text = (f"{row['service']:16} {row['layout']:5}  {row['files']:2d} files "
            f"{row['lines']:5d} lines  built {row['records built']:.1f}  "
            f"encoded {row['encodes']:.1f}  decoded {row['decodes']:.1f}  "
            f"Delta objects {row['deltas built']:.1f}  "
            f"async-generator resumptions {row['async generator resumptions']:.1f}  "
            f"({row['measured']} of {row['words']} words, {row['frames']} frames)")
    if files:
        text += "\n" + "\n".join(f"    {f} ({lines_of(f)})" for f in row["file list"])
        text += "\n" + "\n".join(f"    {k}: {v:g}" for k, v in
                                 row["operations by file"].items())
    return text


if __name__ == "__main__":
    main()
