"""Deltas on their way: how an answer's text travels from the LLM provider, through
the services that pass it on, to the gateway.

Each response record names the field its streamed text travels in, once
(``Response.delta_field``; with ``delta_marks``, and ``run_fields`` / ``run_end``
where deltas may only merge within a run). Between the services of one process a
delta is a ``Delta``, its text alone: passed on as it is, not re-wrapped as each
service's record, and written as a record only when it leaves the process, as the
record of whichever service sends it on (``Delta.encoded_as``). From the bus it
comes as a record's JSON.

``relay`` carries one service's answer into another's: the deltas passed on, the
final record made into the relaying service's own. ``coalesce`` joins the deltas that
are waiting together, so a reader that fell behind gets them as one (the relay for
the services, the gateway for its clients); nothing waits for more than is already
there, so no token is held back.
"""
from collections.abc import AsyncGenerator, Callable, Hashable, Sequence
from contextlib import aclosing
from typing import Any, TypeVar, overload

from pydantic_core import from_json, to_json

from ..schema import Response, decode
from .rpc import ServiceError

S = TypeVar("S", bound=Response)
R = TypeVar("R")

TOKEN_FIELDS = ("in_token", "out_token")  # summed when records merge (they are deltas too)


class Delta:
    """A piece of an answer's text, between the services of one process; ``kind``
    for a record that streams several kinds of text (the agent's ``thought`` or
    ``answer``), else None."""

    __slots__ = ("text", "kind")

    def __init__(self, text: str, kind: str | None = None) -> None:
        self.text = text
        self.kind = kind

    def encoded_as(self, model: type[Response]) -> bytes:
        """``model``'s delta record with this text, as the bus carries it: the bytes
        ``as_record(model, self).encoded()`` would be, without building the record."""
        head, tail = _templates.get((model, self.kind)) or _template(model, self.kind)
        return head + to_json(self.text) + tail

    def __repr__(self) -> str:
        return f"Delta({self.text!r}, {self.kind!r})"


Frame = tuple[bytes | Delta, bool]  # (a record's JSON, or a delta; is it the final one)
BusFrame = tuple[bytes, bool]  # what the bus carries: always a record's JSON

_templates: dict[tuple[type[Response], str | None], tuple[bytes, bytes]] = {}


def _template(model: type[Response], kind: str | None) -> tuple[bytes, bytes]:
    """``model``'s delta record (of ``kind``) as JSON around where its text goes."""
    field = model.delta_field
    if field is None:
        raise TypeError(f"{model.__name__} declares no delta_field: it streams no text")
    empty = as_record(model, Delta("", kind)).encoded()
    at = empty.index(b'"%s":""' % field.encode()) + len(field) + 3
    _templates[model, kind] = empty[:at], empty[at + 2:]
    return _templates[model, kind]


def as_record(model: type[S], payload: bytes | Delta) -> S:
    """A frame's payload as a ``model`` record."""
    if isinstance(payload, Delta):
        fields: dict[str, Any] = {**model.delta_marks, str(model.delta_field): payload.text}
        if payload.kind is not None:
            fields.update((name, payload.kind) for name in model.delta_kinds)
        return model(**fields)
    return decode(model, payload)


async def relay(batches: AsyncGenerator[Sequence[Frame], None], source: type[S],
                last: Callable[[S], R]) -> AsyncGenerator[Delta | R, None]:
    """Another service's answer (``source`` records) passed on: its deltas as they
    come, those already waiting joined into one, then ``last(its final record)``.
    Records that carry no text before the final one (RAG's metadata) are not passed
    on. An error record raises ``ServiceError``. Closing this closes ``batches``,
    which cancels the request (and its LLM stream)."""
    async with aclosing(batches):
        async for batch in batches:
            for payload, final in coalesce(batch, source):
                if final:
                    record = as_record(source, payload)  # always encoded, in fact
                    if record.error is not None:
                        raise ServiceError(record.error)
                    yield last(record)
                elif isinstance(payload, Delta):
                    yield payload
                elif text := _text(source, payload):
                    yield Delta(text)


def _text(model: type[Response], data: bytes) -> str | None:
    value = from_json(data).get(model.delta_field)
    return value if isinstance(value, str) else None


@overload
def coalesce(batch: list[BusFrame], model: type[Response]) -> list[BusFrame]: ...
@overload
def coalesce(batch: Sequence[Frame], model: type[Response]) -> list[Frame]: ...


def coalesce(batch: Sequence[Frame], model: type[Response]) -> Sequence[Frame]:
    """``batch`` with every run of waiting deltas joined into one: consecutive
    non-final records of ``model`` carrying text in its ``delta_field`` that its run
    rule lets merge (and, from the bus, with the same fields) become one record, the
    text joined, token counts summed, the other fields from the last. Final records,
    and everything else, pass through as they are; a batch of one, or of a model
    that streams no text, comes back untouched."""
    if len(batch) < 2 or model.delta_field is None:
        return batch  # bytes in, bytes out: ``_joined`` makes a ``Delta`` of ``Delta``s only
    merged: list[Frame] = []
    run: list[tuple[bytes | Delta, Any]] = []
    run_of: Hashable | None = None  # the run key of what is in ``run``
    for payload, final in batch:
        entry, key = (None, None) if final else _mergeable(payload, model)
        if run and key != run_of:
            merged.append(_joined(run, model))
            run = []
        if key is None:
            merged.append((payload, final))
        else:
            run.append((payload, entry))
            run_of = key
    if run:
        merged.append(_joined(run, model))
    return merged


def _mergeable(payload: bytes | Delta, model: type[Response]
               ) -> tuple[Any, Hashable | None]:
    """What merging reads of ``payload``, and its run key (None: stands alone)."""
    if isinstance(payload, Delta):
        return payload, (Delta, payload.kind)
    record = from_json(payload)
    if not isinstance(record, dict) or not isinstance(record.get(model.delta_field), str):
        return None, None
    if model.run_end is not None and record.get(model.run_end):
        return None, None
    return record, (tuple(record.get(name) for name in model.run_fields), frozenset(record))


def _joined(run: list[tuple[bytes | Delta, Any]], model: type[Response]) -> Frame:
    if len(run) == 1:
        return run[0][0], False  # nothing to join: the original as it came
    entries = [entry for _, entry in run]
    if isinstance(entries[0], Delta):
        return Delta("".join(delta.text for delta in entries), entries[0].kind), False
    field = model.delta_field
    merged = dict(entries[-1])
    merged[field] = "".join(record[field] for record in entries)
    for name in TOKEN_FIELDS:
        if name in merged:
            merged[name] = sum(record.get(name) or 0 for record in entries)
    return to_json(merged), False
