"""The shape of an agent tool, as stored in config (DESIGN §7: tools are data).

A tool is config type ``tool``, key = tool id, value = ``ToolDefinition`` as JSON, in
TrustGraph's field names (``type``, ``mcp-tool``), so its tool commands read ours and
the agent reads theirs (a TrustGraph MCP tool names a server configured elsewhere:
here it needs ``url``; its structured-query kinds are not offered). The
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

from pydantic import AliasChoices, Field, model_validator

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
    # Stored as ``type``, TrustGraph's name for it (its tg-set-tool and tg-show-tools
    # write and read that); ``kind`` is read too.
    kind: ToolKind = Field(validation_alias=AliasChoices("type", "kind"),
                           serialization_alias="type")
    group: list[str] = Field(default_factory=list)
    arguments: list[ToolArgument] = Field(default_factory=list)
    template: str | None = None  # kind prompt: the template id
    url: str | None = None  # kind mcp-tool: the MCP server's endpoint
    # kind mcp-tool: the server's name for it (default: name); stored as ``mcp-tool``
    mcp_tool: str | None = Field(None, validation_alias=AliasChoices(
        "mcp-tool", "mcp_tool"), serialization_alias="mcp-tool")

    @model_validator(mode="after")
    def _what_the_kind_needs(self) -> Self:
        # Caught when the tool is stored, not when the LLM first picks it mid-dialog.
        if self.kind == "prompt" and not self.template:
            raise ValueError("a prompt tool needs template (the prompt template id)")
        if self.kind == "mcp-tool" and not self.url:
            raise ValueError("an mcp-tool needs url (the MCP server's endpoint)")
        return self

    def config_value(self) -> dict:
        """The JSON value to store in config (an MCP tool with its ``mcp-tool`` always
        written: TrustGraph's tg-show-tools reads it)."""
        value = self.model_dump(by_alias=True, exclude_none=True)
        if self.kind == "mcp-tool":
            value["mcp-tool"] = self.remote_name
        return value

    @property
    def remote_name(self) -> str:
        """An MCP tool's name on its server."""
        return self.mcp_tool or self.name
