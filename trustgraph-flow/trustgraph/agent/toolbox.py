"""The tools the agent may offer: config type ``tool`` (key = tool id, value =
``ToolDefinition``), kept current by the service's config watcher.

When config holds no tools on the agent's first start, ``DEFAULT_TOOLS`` are stored
there, as the prompt service does with its templates, so a fresh stack can answer
from its graph and documents and ``tg-show-tools`` shows what the agent uses.
"""
import logging
from typing import Any

from pydantic import ValidationError

from trustgraph.schema.tool import ToolArgument, ToolDefinition

log = logging.getLogger(__name__)

_QUESTION = [ToolArgument(name="question", type="string",
                          description="the question, self-contained: name what it is about")]

DEFAULT_TOOLS: dict[str, ToolDefinition] = {
    "knowledge": ToolDefinition(
        name="knowledge-query", kind="knowledge-query", arguments=_QUESTION,
        description="Answers a question from the knowledge graph of the user's "
                    "collection: facts about entities and how they relate."),
    "documents": ToolDefinition(
        name="document-query", kind="document-query", arguments=_QUESTION,
        description="Answers a question from the passages of the documents in the "
                    "user's collection."),
}


def default_values() -> dict[str, dict]:
    return {id: tool.config_value() for id, tool in DEFAULT_TOOLS.items()}


class Toolbox:
    """The current tools by id. A value config holds that is not a valid tool is
    left out with a warning, not allowed to break every dialog."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        self.replace(values if values is not None else default_values())

    def replace(self, values: dict[str, Any]) -> None:
        tools = {}
        for id, value in values.items():
            try:
                tools[id] = ToolDefinition.model_validate(value)
            except ValidationError as error:
                log.warning("tool %r in config is not valid, left out: %s", id, error)
        self.tools = tools

    def offered(self, groups: list[str] | None) -> dict[str, ToolDefinition]:
        """By the name the LLM calls them: every tool, or with ``groups`` the tools
        in at least one of them (TrustGraph's tool groups)."""
        chosen = self.tools.values() if groups is None else (
            tool for tool in self.tools.values() if set(tool.group) & set(groups))
        return {tool.name: tool for tool in sorted(chosen, key=lambda tool: tool.name)}


def described(tools: dict[str, ToolDefinition]) -> list[dict]:
    """The ``tools`` variable of ``agent-react``."""
    return [{"name": tool.name, "description": tool.description,
             "arguments": [argument.model_dump() for argument in tool.arguments]}
            for tool in tools.values()]
