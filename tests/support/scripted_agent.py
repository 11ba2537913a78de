"""A scripted ``agent`` service on the real bus, for testing the agent's interfaces
(gateway, client, CLI) apart from the real agent.

It answers with the frame sequence of PROTOCOL §2 and seed 003 "Agent Streaming
Behavior" (the real runtime, ``Service``, does correlation, end flags, errors and
cancellation). The question steers it with a directive, ``[steps=N tokens=N
delay=S fail_after=K]``: N ReAct steps, each a thought in THOUGHT_PIECES pieces (the
last ending the message), an action (tool ``search``) and one observation; then the
answer, ``tok0 tok1 ...`` (``expected_text``), its last piece ending the message and
the dialog with the token totals and the session id. ``fail_after`` raises after K
answer pieces (at once when not streaming). Pattern ``ask`` opens with one thought
naming the route, carrying the sources. Without ``streaming`` the dialog is the
answer, whole, in one frame.
"""
import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tests.support.scripted_rag import (  # noqa: F401
    PROMPT_TOKENS,
    RagScript,
    answering,
    expected_text,
    gateways,
    sources_for,
    token,
)
from trustgraph.base import (
    Context,
    HandledError,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Service,
)
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.schema import (
    CONFIG_FLOW,
    AgentRequest,
    AgentResponse,
    ConfigRequest,
    ConfigResponse,
)

MODEL = "scripted-agent"
THOUGHT_PIECES = 3
TOOL = "search"


@dataclass
class AgentScript(RagScript):
    steps: int = 1


def thought(step: int) -> list[str]:
    """The pieces of step ``step``'s thought."""
    return [f"think{step}.{n} " for n in range(THOUGHT_PIECES)]


def arguments(step: int) -> dict:
    return {"query": f"q{step}", "limit": step + 1}


def observation(step: int) -> str:
    return f"result {step}\n"


def session_for(request: AgentRequest) -> str:
    """The session the scripted agent uses: the one asked for, or a new one."""
    return request.session_id or f"session-{uuid.uuid4().hex[:8]}"


def frame(kind: str, content: str = "", **fields) -> AgentResponse:
    return AgentResponse(chunk_type=kind, content=content, **fields)


@dataclass
class ScriptedAgent:
    """The service, and what it saw: the requests (and their bus ids), and the
    questions whose dialogs stopped early (the request was cancelled)."""

    requests: list = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_cancelled(self, question: str, timeout: float) -> None:
        """Return once the dialog about ``question`` has been stopped early."""
        async with asyncio.timeout(timeout):
            while question not in self.cancelled:
                self._changed.clear()
                await self._changed.wait()

    def services(self, _: object) -> list[Service]:
        return [Service("agent", AgentRequest, AgentResponse, self._handle)]

    async def _handle(self, request: AgentRequest, ctx: Context
                      ) -> AsyncIterator[AgentResponse]:
        self.requests.append(request)
        self.ids.append(ctx.id)
        script = AgentScript().updated(request.question)
        session = session_for(request)
        totals = {"in_token": PROMPT_TOKENS * (script.steps + 1),
                  "out_token": script.tokens, "model": MODEL, "session_id": session}
        if not request.streaming:
            if script.fail_after is not None:
                raise HandledError("agent-error", "scripted failure")
            yield frame("answer", expected_text(script.tokens), end_of_message=True,
                        end_of_dialog=True, **totals)
            return
        finished = False
        try:
            async for record in self._dialog(request, script, totals):
                yield record
            finished = True
        finally:
            if not finished:
                self.cancelled.append(request.question)
                self._changed.set()

    async def _dialog(self, request: AgentRequest, script: AgentScript, totals: dict
                      ) -> AsyncIterator[AgentResponse]:
        if request.pattern == "ask":
            yield frame("thought", "route: knowledge", end_of_message=True, route="knowledge",
                        sources=sources_for("document-rag", request.user, request.collection))
        for step in range(script.steps):
            pieces = thought(step)
            for n, piece in enumerate(pieces):
                yield frame("thought", piece, end_of_message=n == len(pieces) - 1)
            yield frame("action", TOOL, end_of_message=True, tool=TOOL,
                        arguments=arguments(step))
            yield frame("observation", observation(step), end_of_message=True)
        await asyncio.sleep(script.first)
        for i in range(script.tokens):
            if i and script.delay:
                await asyncio.sleep(script.delay)
            if script.fail_after is not None and i == script.fail_after:
                raise HandledError("agent-error", "scripted failure")
            last = i == script.tokens - 1
            yield frame("answer", token(i), end_of_message=last, end_of_dialog=last,
                        **(totals if last else {}))


@dataclass
class AgentStack:
    url: str  # the gateway, open
    flow: str
    agent: ScriptedAgent


@asynccontextmanager
async def scripted_agent_stack(broker_url: str, config_dir: str | None = None
                               ) -> AsyncIterator[AgentStack]:
    """The scripted agent on a new flow behind an open gateway; given a
    ``config_dir``, the real config service too (where the agent's tools are kept)."""
    flow = f"agent-{uuid.uuid4().hex[:6]}"
    agent = ScriptedAgent()
    processors = [Processor(ProcessorSpec("scripted-agent", ProcessorSettings, agent.services),
                            ProcessorSettings(pulsar_url=broker_url, tg_flows=[flow]))]
    if config_dir is not None:
        processors.append(Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=broker_url,
                                                                tg_data_dir=config_dir)))
    try:
        for processor in processors:
            await processor.start()
        await answering(broker_url, "agent", flow, probe=AgentRequest(question="[tokens=1]"),
                        response=AgentResponse)
        if config_dir is not None:
            await answering(broker_url, "config", CONFIG_FLOW,
                            probe=ConfigRequest(operation="config"), response=ConfigResponse)
        agent.requests.clear()
        agent.ids.clear()
        async with gateways(broker_url, flow) as (url,):
            yield AgentStack(url, flow, agent)
    finally:
        for processor in processors:
            await processor.stop()
