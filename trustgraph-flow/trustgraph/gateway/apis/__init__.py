"""The gateway's APIs beyond the core's service routes: each is one module with
``install(core)`` (see ``core/api.py``), and one line here."""
from collections.abc import Callable

from ..core import Core
from . import cores, lazy_rag, llm, mcp_server, openai_chat, openapi, page, query, traces, usage

APIS: tuple[Callable[[Core], None], ...] = (
    query.install,     # /api/v1/query: the answer-stream API
    lazy_rag.install,  # /api/v1/lazy-rag/...
    llm.install,       # /api/v1/llm: which LLM answers (the page's demo notice)
    cores.install,     # /api/v1/collections/{c}/core: knowledge cores out and in
    openai_chat.install,  # /v1/models, /v1/chat/completions (also /api/v1/openai/...)
    mcp_server.install,  # /mcp: the MCP server (streamable HTTP)
    usage.install,     # /api/v1/usage: LLM tokens per day, user, flow, model (admins)
    traces.install,    # /api/v1/traces, /api/v1/explain: traces and explanations kept
    page.install,      # the workbench page at /
    openapi.install,   # /api/v1/openapi.json, from every part declared
)
