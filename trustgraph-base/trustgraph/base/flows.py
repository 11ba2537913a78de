"""Which flows a processor serves, and what each flow's parameters say.

A processor serves every running flow (config type ``flow``) whose processors name
it, while the flow runs (``Processor``, through ``serving.FlowServing``). A handler
reads its flow's parameters from its context: ``ctx.parameters.of(Model)``, where
``Model`` is a ``FlowParameters`` naming the parameters it reads (each optional:
unset, the request's own field or the processor's setting applies).

Two other sources of flows, for a processor with no flow config to follow:
``TG_FLOWS`` set pins the flows a process serves (it then follows nothing: how a
test, or a process dedicated to some flows, runs); and a processor following config
that finds no config service within ``TG_CONFIG_WAIT`` serves ``DEFAULT_FLOW`` until
one answers.
"""
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from ..schema.flows import FlowDefinition

log = logging.getLogger(__name__)


class BadFlowParameter(ValueError):
    """A flow's parameter is not what its reader takes (config edited by hand: the
    flow service checks each at ``start-flow``); the request fails saying which."""


class FlowParameters(BaseModel):
    """The parameters one processor reads, by their hyphenated names
    (``chunk_size`` reads ``chunk-size``); every field optional."""

    model_config = ConfigDict(extra="ignore", frozen=True,
                              alias_generator=lambda name: name.replace("_", "-"))


P = TypeVar("P", bound=FlowParameters)


class Parameters(Mapping[str, JsonValue]):
    """A flow's parameter values, as ``start-flow`` checked and typed them."""

    __slots__ = ("flow", "_values", "_read")

    def __init__(self, flow: str, values: Mapping[str, JsonValue] | None = None) -> None:
        self.flow = flow
        self._values = dict(values or {})
        self._read: dict[type, FlowParameters] = {}

    def of(self, model: type[P]) -> P:
        """The values ``model`` names, validated once per model."""
        read = self._read.get(model)
        if read is None:
            try:
                read = self._read[model] = model.model_validate(self._values)
            except ValidationError as error:
                problem = error.errors()[0]
                name = ".".join(str(part) for part in problem["loc"])
                raise BadFlowParameter(f"flow {self.flow!r}: parameter {name}: "
                                       f"{problem['msg']}") from None
        assert isinstance(read, model)
        return read

    def __getitem__(self, name: str) -> JsonValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(other) == self._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values)))


@dataclass(frozen=True)
class Flow:
    """A flow as a processor serves it."""

    id: str
    parameters: Parameters = field(default_factory=lambda: Parameters(""))
    blueprint: str = ""

    @classmethod
    def plain(cls, flow: str) -> "Flow":
        """A flow with no parameters (pinned by ``TG_FLOWS``, or the fallback)."""
        return cls(flow, Parameters(flow))


R = TypeVar("R", bound=BaseModel)


def defaulted(record: R, parameters: FlowParameters) -> R:
    """``record`` with each field its sender left unset (not in ``model_fields_set``:
    a record written with only its set fields, as RAG requests are) given the flow's
    parameter of the same name, where the flow sets one."""
    update = {name: value for name, value in parameters.model_dump().items()
              if value is not None and name in type(record).model_fields
              and name not in record.model_fields_set}
    if not update:
        return record
    return type(record).model_validate({**record.model_dump(exclude_unset=True), **update})


def names(listed: str, processor: str) -> bool:
    """Whether a blueprint's processor entry ``listed`` names ``processor``: its own
    name, or the family it is a variant of (``text-completion`` names
    ``text-completion-openai``)."""
    return processor == listed or processor.startswith(f"{listed}-")


def flows_of(processor: str, items: Mapping[str, Any]) -> dict[str, Flow]:
    """The running flows (config type ``flow``: id → item) that ``processor`` serves.
    An item that is not a flow is logged and left out."""
    served: dict[str, Flow] = {}
    for flow_id, item in items.items():
        try:
            definition = FlowDefinition.model_validate(item)
        except ValidationError as error:
            log.warning("config item flow/%s is not a flow (%s): not served", flow_id,
                        error.errors()[0]["msg"])
            continue
        if any(names(listed, processor) for listed in definition.processors):
            served[flow_id] = Flow(flow_id, Parameters(flow_id, definition.parameters),
                                   definition.blueprint_name)
    return served


def pinned(flow_ids: list[str]) -> dict[str, Flow]:
    return {flow_id: Flow.plain(flow_id) for flow_id in flow_ids}
