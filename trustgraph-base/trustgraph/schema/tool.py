"""The shape of an agent tool, as stored in config (DESIGN §7: tools are data).

A tool is config type ``tool``, key = tool id, value = ``ToolDefinition`` as JSON. The
agent offers the LLM the tools of the request's ``group`` (all tools when it names
none); ``kind`` says what calling one does:

* ``knowledge-query``: a GraphRAG question in the user's collection;
* ``document-query``: a DocumentRAG question in the user's collection;
* ``text-completion``: a question put straight to the LLM;
* ``prompt``: the prompt template ``template`` rendered with the arguments;
* ``mcp-tool``: the tool ``mcp_tool`` (default: ``name``) of the Model Context
  Protocol server at ``url`` (streamable HTTP).
"""
from typing import Literal, Self, get_args

from pydantic import Field, model_validator

from .record import Record

TOOL_CONFIG_TYPE = "tool"

ToolKind = Literal["knowledge-query", "document-query", "text-completion", "prompt",
                   "mcp-tool"]
TOOL_KINDS: tuple[str, ...] = get_args(ToolKind)


class ToolArgument(Record):
    name: str = Field(min_length=1)
    type: str = "string"  # a JSON Schema type name, as the LLM is told
    description: str = ""


class ToolDefinition(Record):
    name: str = Field(min_length=1)  # what the LLM calls it
    description: str = Field(min_length=1)  # what the LLM is told it is for
    kind: ToolKind
    group: list[str] = Field(default_factory=list)
    arguments: list[ToolArgument] = Field(default_factory=list)
    template: str | None = None  # kind prompt: the template id
    url: str | None = None  # kind mcp-tool: the MCP server's endpoint
    mcp_tool: str | None = None  # kind mcp-tool: the server's name for it (default: name)

    @model_validator(mode="after")
    def _what_the_kind_needs(self) -> Self:
        # Caught when the tool is stored, not when the LLM first picks it mid-dialog.
        if self.kind == "prompt" and not self.template:
            raise ValueError("a prompt tool needs template (the prompt template id)")
        if self.kind == "mcp-tool" and not self.url:
            raise ValueError("an mcp-tool needs url (the MCP server's endpoint)")
        return self

    def config_value(self) -> dict:
        """The JSON value to store in config."""
        return self.model_dump(exclude_none=True)
