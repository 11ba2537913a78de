"""What an MCP tool is (``Tool``: a name, a description, its arguments and its result
as models, the least role that may use it) and what it works with (``Call``): the
services, asked through ``asking`` on behalf of the caller, an answer gathered whole
while the host is told how it is getting on. The tools are ``mcp_tools.TOOLS``."""
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trustgraph.answers import Event, Progress, Step, Text
from trustgraph.schema import Role, Usage

from ..core import Caller, Dispatcher, allowed
from .asking import answer, ask, collected, read
from .collected import Collected


@dataclass(frozen=True)
class Call:
    """What a tool works with: the services, on behalf of whom, on which flow, and
    how to tell the host how it is getting on."""

    client: Dispatcher
    caller: Caller
    flow: str
    progress: Callable[[str], Awaitable[None]]

    async def answered(self, service: str, request: dict[str, Any],
                       text_only: bool = False) -> Collected:
        """``service``'s whole answer (asked to stream), told to the host as it comes:
        what retrieval is doing, the agent's actions, the text. ``text_only``: an
        answer whose text failed is a failure (``Reader``)."""
        frames, reader = ask(self.client, self.caller, service, self.flow,
                             {**request, "streaming": True}, text_only=text_only)
        return await collected(read(frames, reader), self._tell)

    async def final(self, service: str, request: dict[str, Any]) -> dict[str, Any]:
        """The one record of a service that answers once (``asking.answer``)."""
        return await answer(self.client, self.caller, service, self.flow, request)

    async def _tell(self, events: list[Event]) -> None:
        for event in events:
            if type(event) is Progress:
                await self.progress(event.message)
            elif type(event) is Step and event.kind == "action":
                await self.progress(f"using {event.tool or event.delta}")
        if text := "".join(event.delta for event in events if type(event) is Text):
            await self.progress(text)


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Result(BaseModel):
    pass


COLLECTION = Field(None, min_length=1, description="the collection to use (default: "
                                                   "'default'); list_collections names them")


def collection(name: str | None) -> dict[str, str]:
    return {"collection": name} if name else {}


class UsageResult(Result):
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None

    @classmethod
    def of(cls, usage: Usage) -> "UsageResult":
        return cls(**asdict(usage))


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[Arguments]
    result: type[Result]
    run: Callable[[Call, Any], Awaitable[tuple[str, Result]]]
    # The service (and operation) a caller's role must reach to be offered the tool
    # (the role table, core/access.py): the one it writes with, or reads the most by.
    service: str
    operation: str | None = None

    @property
    def read_only(self) -> bool:
        """Offered to a reader: reads and asks only."""
        return reaches("reader", self)


def reaches(role: Role | None, tool: Tool) -> bool:
    """Whether ``role`` may use what ``tool`` needs."""
    reached = allowed(role)
    if tool.service not in reached:
        return False
    operations = reached[tool.service]
    return operations is None or tool.operation in operations
