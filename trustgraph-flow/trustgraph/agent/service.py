"""Processor ``agent`` (docs/agent.md): a question answered by reasoning over tools
(``react``) or by routing, retrieval and one streamed answer (``ask``), with the
session's earlier turns as memory.

Tools are config (type ``tool``), watched and applied to the next dialog without a
restart; sessions live in ``<TG_DATA_DIR>/agent/sessions.db``.
"""
import logging
import uuid
from pathlib import Path
from typing import Literal

from pydantic import Field

from trustgraph.base import (
    Context,
    Handler,
    ProcessorSettings,
    ProcessorSpec,
    PromptClient,
    Relay,
    Runtime,
    Service,
)
from trustgraph.schema import AgentRequest, AgentResponse, Usage
from trustgraph.schema.tool import TOOL_CONFIG_TYPE

from .ask import AskLimits, ask
from .dialog import Dialog, Pattern, run_dialog
from .mcp_tool import warm_sdk
from .react import ERROR, ReactLimits, react
from .sessions import SessionStore
from .step_schema import ANSWER_CHARS
from .toolbox import Toolbox, default_values

log = logging.getLogger(__name__)

NAME = "agent"


class AgentSettings(ProcessorSettings):
    agent_pattern: Literal["react", "ask"] = Field(
        "react", description="the pattern of a request that names none")
    agent_max_iterations: int = Field(
        10, ge=1, le=50, description="ReAct steps before a dialog fails without an answer")
    agent_answer_chars: int = Field(
        ANSWER_CHARS, ge=100, le=100_000, description=(
            "the longest final answer a ReAct step's schema allows (a model held to "
            "the schema ends its answer there)"))
    agent_history_turns: int = Field(
        10, ge=0, description="earlier turns of a session the model is shown")
    agent_retrieval: Literal["document", "graph"] = Field(
        "document", description="where the ask pattern's knowledge route retrieves")
    agent_doc_limit: int = Field(
        10, ge=1, le=500, description="chunks (or seed entities) the knowledge route uses")


def agent_handler(settings: AgentSettings, toolbox: Toolbox, sessions: SessionStore
                  ) -> Handler[AgentRequest, AgentResponse]:
    react_limits = ReactLimits(settings.agent_max_iterations, settings.tg_request_timeout,
                               settings.agent_answer_chars)
    ask_pattern = ask(AskLimits(settings.agent_retrieval, settings.agent_doc_limit))

    async def handle(request: AgentRequest, ctx: Context) -> Relay[AgentResponse]:
        """The dialog's frames (relayed: the runner reads them, and closes them, its
        LLM stream and tool call with them, when the request is cancelled)."""
        session_id = request.session_id or uuid.uuid4().hex
        turns = [] if request.session_id is None else await sessions.turns(
            request.user, session_id, settings.agent_history_turns)
        dialog = Dialog(request, session_id, turns, ctx.clients,
                        PromptClient(await ctx.clients.get("prompt")), Usage(), sessions)
        pattern: Pattern = ask_pattern if (
            request.pattern or settings.agent_pattern) == "ask" else react(
            toolbox.offered(request.group), react_limits)
        log.info("id=%s agent: %s pattern, session %s (%d earlier turns)", ctx.id,
                 request.pattern or settings.agent_pattern, session_id, len(turns))
        return run_dialog(dialog, pattern)
    return handle


async def agent_services(runtime: Runtime) -> list[Service]:
    settings: AgentSettings = runtime.settings
    sessions = SessionStore(Path(settings.tg_data_dir) / "agent" / "sessions.db")
    toolbox = Toolbox()  # the shipped tools, until config answers
    config = await runtime.config()
    first_read = True

    async def on_change(snapshot: dict[str, dict], version: int) -> None:
        nonlocal first_read
        values = snapshot[TOOL_CONFIG_TYPE]
        if first_read and not values:
            log.info("config has no tools: storing the shipped ones")
            values = default_values()
            await config.put_many(TOOL_CONFIG_TYPE, values)
        first_read = False
        toolbox.replace(values)
        if any(tool.kind == "mcp-tool" for tool in toolbox.tools.values()):
            warm_sdk()
        log.info("agent tools at config version %d: %s", version,
                 ", ".join(sorted(toolbox.tools)) or "none")

    if not await runtime.watch_config([TOOL_CONFIG_TYPE], on_change, settings.tg_config_wait):
        log.warning("config service not reached: offering the shipped tools until it "
                    "announces itself")
    return [Service(NAME, AgentRequest, AgentResponse,
                    agent_handler(settings, toolbox, sessions), error_type=ERROR,
                    close=sessions.aclose)]


SPEC = ProcessorSpec(NAME, AgentSettings, agent_services, uses=(
    "prompt", "graph-rag", "document-rag", "embeddings", "document-embeddings",
    "graph-embeddings", "subgraph"))
