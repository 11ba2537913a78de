"""The one reader of an answer's records: a service's response records (decoded JSON,
as the bus and the gateway's websocket carry them) turned into events
(``events.py``), by what the service's response model declares (``delta_field``,
``delta_marks``, ``delta_kinds``, ``run_end``, ``whole_field``, ``opening``,
``progress_field``, ``step_kinds``, ``error_kinds``, ``end_field``,
``result_fields``, ``result_error``: ``trustgraph.schema.record.Response``). No other
module reads an answer's records by field name, so a new answering service that
declares these needs no change in any API.

The gateway's APIs and the client library both use it; it imports nothing but the
records, so the client library stays free of the processors' runtime.
"""
from typing import Any

from ..schema import Error, Response, Usage
from .events import Done, Event, Failed, Opened, Progress, Source, Sources, Step, Text

TOKEN_FIELDS = frozenset(("in_token", "out_token", "model"))


class Reader:
    """One answer, read record by record (``read``). It keeps what the events need
    across records: the tokens spent so far (summed: counts are deltas), whether the
    answer has opened, the latest sources and session."""

    def __init__(self, model: type[Response], text_only: bool = False) -> None:
        self.model = model
        # For an API that shows only the text: an answer whose text failed while its
        # result stands (``result_error``: LazyRAG's summary) is a failure, ``Failed``.
        self.text_only = text_only
        self.usage = Usage()
        self.opened = False
        self._sources: list[Source] | None = None
        self._session: str | None = None
        # The declarations, looked up once: ``read`` runs per delta.
        self._delta = model.delta_field
        self._marks = tuple(model.delta_marks.items())
        self._whole = model.whole_field
        self._kind = model.delta_kinds[0] if model.delta_kinds else None
        self._ends = model.run_end
        self._progress = model.progress_field
        self._end = model.end_field
        self._found_later = "sources" in model.model_fields  # records may carry sources

    def read(self, record: dict[str, Any], final: bool | None = None) -> list[Event]:
        """The events one record says, in order. ``final``: it is the answer's last
        (the transport's flag; None: the record's own, ``end_field``)."""
        if record.get("error"):
            return [Failed(Error.model_validate(record["error"]))]
        if not TOKEN_FIELDS.isdisjoint(record):  # most deltas carry no counts
            self.usage.add(Usage.of(record))
        if self._progress is not None and (message := record.get(self._progress)) is not None:
            return [Progress(message)]
        if final is None:
            final = bool(record.get(self._end))
        events: list[Event] = []
        if not self.opened:
            events.append(self._open(record))
        elif self._found_later and not self._sources and (sources := record.get("sources")):
            self._sources = sources  # evidence found on the way (the agent's ``ask``)
            if not final:
                events.append(Sources(sources))
        piece = self._piece(record) if self._kind is None else self._kinded(record)
        if piece is not None:
            events.append(piece)
            if type(piece) is Failed:
                return events
        if final:
            done = self._done(record)
            events.append(Failed(done.failure) if self.text_only and done.failure else done)
        return events

    def _piece(self, record: dict[str, Any]) -> Text | None:
        """A service that streams one kind of text: a delta (its ``delta_marks``, if
        any, say so) or, in a record that is no delta, the whole text."""
        if self._marks and not all(record.get(key) == value for key, value in self._marks):
            text = record.get(self._whole) if self._whole else None
        else:
            text = record.get(self._delta) if self._delta else None
        return Text(text) if text else None

    def _kinded(self, record: dict[str, Any]) -> Text | Step | Failed | None:
        """A service that streams several kinds (``delta_kinds``): steps, the answer,
        or an error. An empty piece that ends its message still says so."""
        model = self.model
        kind = record.get(self._kind) if self._kind else None
        content: str = (record.get(self._delta) if self._delta else None) or ""
        ends = bool(record.get(self._ends)) if self._ends else False
        if kind in model.error_kinds:
            return Failed(Error(type=model.error_kinds[kind],
                                message=content or "the service failed"))
        if kind in model.step_kinds:
            tool = record.get("tool")
            if not (content or ends or tool):
                return None
            return Step(kind, content, ends, tool, record.get("arguments"))
        # The answer (or a kind this reader does not know: shown, not lost).
        return Text(content, ends) if content or ends else None

    def _open(self, record: dict[str, Any]) -> Opened:
        """The first record: what it says, or what the service declares it always
        says (``opening``)."""
        self.opened = True
        opening = self.model.opening
        sources = record.get("sources")
        if sources is None and "sources" in opening:
            sources = list(opening["sources"])
        self._sources = sources
        self._session = record.get("session_id")
        return Opened(sources, record.get("optimized_query", opening.get("optimized_query")),
                      record.get("subqueries") or list(opening.get("subqueries", ())),
                      self._session)

    def _done(self, record: dict[str, Any]) -> Done:
        model = self.model
        failure = record.get(model.result_error) if model.result_error else None
        return Done(self.usage, record.get("sources") or self._sources,
                    record.get("session_id") or self._session,
                    {name: record.get(name) for name in model.result_fields},
                    Error.model_validate(failure) if failure else None)
