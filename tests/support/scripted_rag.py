"""Scripted ``graph-rag`` and ``document-rag`` services on the real bus, for testing
the interfaces (gateway, client, CLI) apart from the real retrieval.

They answer with the record sequence of PROTOCOL §2 (the real runtime, ``Service``,
does correlation, end flags, errors and cancellation). As with the scripted LLMs, the
question steers the answer with a directive: ``[tokens=N first=S delay=S
fail_after=K repeat=1]``; tokens are ``tok0 tok1 ...`` (``expected_text``);
``fail_after`` raises after K deltas (at once when not streaming); ``repeat`` makes
the final record carry the whole ``response`` again, as a careless service might.
The sources depend on the service, user and collection, so a test can see that its
scope arrived.

``scripted_rag_gateway`` puts the services behind a real gateway, on a flow of their
own, for a test module's fixture (LazyRAG off at that gateway unless asked for:
tests/support/scripted_lazy_rag.py scripts it); ``answering`` and ``gateways`` serve
the other scripted services' gateways too.
"""
import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

from tests.support.scripted_llm import PROMPT_TOKENS, expected_text, token  # noqa: F401
from tests.support.waiting import serving
from trustgraph.base import (
    Context,
    HandledError,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Service,
)
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import (
    DocumentRagRequest,
    GraphRagRequest,
    RagResponse,
    Record,
    Response,
    Source,
    Term,
)

DIRECTIVE = re.compile(r"\[([a-z_]+=[^\]]*)\]")
MODEL = "scripted-rag"


@dataclass
class RagScript:
    tokens: int = 5
    first: float = 0.0
    delay: float = 0.0
    fail_after: int | None = None
    repeat: int = 0
    summary_fail: int = 0  # lazy-rag: the LLM fails; the final record says so
    cache_miss: int = 0  # lazy-rag: the communities were computed for this question

    def updated(self, text: str) -> "RagScript":
        match = DIRECTIVE.search(text)
        if not match:
            return self
        try:
            values = dict(item.split("=", 1) for item in match.group(1).split())
            return replace(self, **{k: (float if k in ("first", "delay") else int)(v)
                                    for k, v in values.items()})
        except (ValueError, TypeError):
            return self  # text that only looks like a directive (fuzzed input) is text


def sources_for(service: str, user: str, collection: str) -> list[Source]:
    """Two chunk sources, and for graph-rag a triple, named after the scope."""
    sources = [Source(id=f"{user}/{collection}/doc{n}/c0", document_id=f"doc{n}",
                      title=f"{collection} document {n}", text=f"text {n} of {collection}",
                      distance=0.1 * n) for n in (1, 2)]
    if service == "graph-rag":
        sources.append(Source(id=f"{user}/{collection}/doc1/c0", document_id="doc1",
                              text="alpha knows beta", distance=0.3,
                              s=Term(t="i", i="http://ex/alpha"),
                              p=Term(t="i", i="http://ex/knows"),
                              o=Term(t="l", v="beta")))
    return sources


def wire_sources(service: str, user: str = "trustgraph", collection: str = "default"
                 ) -> list[dict]:
    """``sources_for`` as the gateway and the client library give them: plain JSON."""
    return [source.model_dump(exclude_none=True)
            for source in sources_for(service, user, collection)]


@dataclass
class ScriptedRag:
    """Both services, and what they saw: the requests (and their bus ids), and the
    questions whose answers stopped early (the generator was closed before its final
    record: the request was cancelled)."""

    names = ("graph-rag", "document-rag")  # the services it serves
    script: RagScript = field(default_factory=RagScript)
    requests: list = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_cancelled(self, query: str, timeout: float) -> None:
        """Return once the answer to ``query`` has been stopped early."""
        async with asyncio.timeout(timeout):
            while query not in self.cancelled:
                self._changed.clear()
                await self._changed.wait()

    def services(self, settings: ProcessorSettings) -> list[Service]:
        return [Service(name, request, RagResponse, self._handler(name))
                for name, request in (("graph-rag", GraphRagRequest),
                                      ("document-rag", DocumentRagRequest))]

    def _handler(self, name: str):
        async def handle(request, ctx: Context) -> AsyncIterator[RagResponse]:
            self.requests.append(request)
            self.ids.append(ctx.id)
            async for record in self._answer(name, request):
                yield record
        return handle

    async def _answer(self, name: str, request) -> AsyncIterator[RagResponse]:
        script = self.script.updated(request.query)
        sources = sources_for(name, request.user, request.collection)
        # (lazy-rag's requests have neither option)
        optimized = f"rewritten: {request.query}" \
            if getattr(request, "optimize_query", False) else None
        subqueries = [f"{request.query} (part {n})" for n in (1, 2)] \
            if getattr(request, "subqueries", False) else []
        totals = {"in_token": PROMPT_TOKENS, "out_token": script.tokens, "model": MODEL}
        text = expected_text(script.tokens)
        if not request.streaming:
            if script.fail_after is not None:
                raise HandledError(f"{name}-error", "scripted failure")
            yield RagResponse(response=text, end_of_stream=True, end_of_session=True,
                              sources=sources, optimized_query=optimized,
                              subqueries=subqueries, **totals)
            return
        finished = False
        try:
            yield RagResponse(message_type="metadata", sources=sources,
                              optimized_query=optimized, subqueries=subqueries)
            await asyncio.sleep(script.first)
            for i in range(script.tokens):
                if i and script.delay:
                    await asyncio.sleep(script.delay)
                if script.fail_after is not None and i == script.fail_after:
                    finished = True
                    raise HandledError(f"{name}-error", "scripted failure")
                yield RagResponse(message_type="chunk", chunk=token(i))
            finished = True
            yield RagResponse(message_type="chunk", chunk="", end_of_stream=True,
                              end_of_session=True, sources=sources,
                              response=text if script.repeat else None, **totals)
        finally:
            if not finished:
                self.cancelled.append(request.query)
                self._changed.set()


async def start_scripted_rag(broker_url: str, flow: str, rag: ScriptedRag) -> Processor:
    """A processor serving ``rag``'s scripted services on ``flow``, answering already."""
    processor = Processor(ProcessorSpec("scripted-rag", ProcessorSettings, rag.services),
                          ProcessorSettings(pulsar_url=broker_url, tg_flows=[flow]))
    await processor.start()
    bus = Bus(broker_url)
    try:
        for service in rag.names:
            await serving(bus, service, flow, GraphRagRequest(query="[tokens=1]"), RagResponse)
    except BaseException:
        await processor.stop()
        raise
    finally:
        await bus.close()
    rag.requests.clear()
    rag.ids.clear()
    return processor


PROBE = GraphRagRequest(query="[tokens=1]")


async def answering(broker_url: str, service: str, flow: str,
                    probe: Record = PROBE,
                    response: type[Response] = RagResponse) -> None:
    """Wait until a just-started service answers ``probe`` (on a bus of its own)."""
    bus = Bus(broker_url)
    try:
        await serving(bus, service, flow, probe, response)
    finally:
        await bus.close()


@dataclass
class ScriptedRagGateway:
    """Both scripted services on a flow of their own, behind a real gateway."""

    url: str  # the gateway, open
    flow: str
    rag: ScriptedRag
    guarded_url: str | None = None  # the same services behind a gateway with a token
    off_url: str | None = None  # the same services behind a gateway with LazyRAG off


@asynccontextmanager
async def gateways(broker_url: str, flow: str, token: str | None = None,
                   lazy_rag: bool = False) -> AsyncIterator[list[str]]:
    """The URLs of an open gateway routing ``flow`` (LazyRAG on as ``lazy_rag``
    says), then, given a ``token``, of one that requires it, then, with ``lazy_rag``,
    of one with LazyRAG off."""
    options = [("", lazy_rag)] + [(token, lazy_rag)] * (token is not None) \
        + [("", False)] * lazy_rag
    started = [Gateway(GatewaySettings(
        pulsar_url=broker_url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
        tg_flows=[flow], tg_request_timeout=10, tg_gateway_token=required,
        lazy_rag_enabled=enabled, tg_gateway_keys=False))
        for required, enabled in options]
    try:
        yield [await gateway.start() for gateway in started]
    finally:
        for gateway in started:
            await gateway.stop()


@asynccontextmanager
async def scripted_rag_gateway(broker_url: str, token: str | None = None,
                               rag: ScriptedRag | None = None, lazy_rag: bool = False
                               ) -> AsyncIterator[ScriptedRagGateway]:
    """``rag``'s scripted services (default: graph-rag and document-rag) on a new flow
    behind an open gateway, with LazyRAG on as ``lazy_rag`` says; given a ``token``, a
    second gateway that requires it; with ``lazy_rag``, a third with LazyRAG off."""
    flow = f"rag-{uuid.uuid4().hex[:6]}"
    rag = ScriptedRag() if rag is None else rag
    processor = await start_scripted_rag(broker_url, flow, rag)
    try:
        async with gateways(broker_url, flow, token, lazy_rag) as urls:
            yield ScriptedRagGateway(urls[0], flow, rag,
                                     urls[1] if token is not None else None,
                                     urls[-1] if lazy_rag else None)
    finally:
        await processor.stop()
