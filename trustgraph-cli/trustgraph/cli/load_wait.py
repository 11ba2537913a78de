"""``--wait`` for tg-load-text and tg-load-pdf: follow each loaded document down the
flow's pipeline until all its chunks have their vectors stored (searchable), and
with ``--wait-graph`` until its graph is stored too (triples and entity vectors of
every chunk: graph questions find it).

A load is answered before the document is even decoded, so only the pipeline can
say how many chunks a document became. The ``load-status`` service says it: the
decoder's count of each document's chunks, how many of them the vector store
holds, and (asked) how many have their graph stored. Polling it for the documents
still on their way gives an honest chunk counter (chunks stored, not chunks sent)
and tells which documents could not be read at all.
"""
import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from trustgraph.api import AsyncTrustGraph, TrustGraphError

POLL_INTERVAL = 0.5  # seconds between status requests while documents are pending
STATUS_BATCH = 500  # ids per load-status request (the service takes up to 1000)


class Loaded(Protocol):
    """What the waiter follows: any loaded document that has its library id."""

    @property
    def id(self) -> str: ...


S = TypeVar("S", bound=Loaded)


@dataclass
class Pending(Generic[S]):
    """A loaded document on its way down the pipeline, as last reported."""

    source: S
    state: str = "decoding"
    chunks: int | None = None
    stored: int = 0
    graph: int = 0  # chunks whose triples and entity vectors are both stored


class Waiter(Generic[S]):
    def __init__(self, client: AsyncTrustGraph, user: str | None, collection: str, flow: str,
                 timeout: float, finished: Callable[[S, int, str | None], None],
                 progressed: Callable[[], None] = lambda: None, graph: bool = False) -> None:
        """``timeout``: seconds without any progress before the documents still
        pending are given up as failed; ``finished(source, chunks, error)``: a
        document is done (``chunks`` stored, and with ``graph`` its graph) or failed."""
        self.graph = graph
        self._client = client
        self._user, self._collection, self._flow = user, collection, flow
        self._timeout = timeout
        self._finished = finished
        self._progressed = progressed
        self._pending: dict[str, Pending[S]] = {}
        self._last_progress = time.monotonic()
        self._last_error = ""
        self.stored_done = 0  # chunks of the documents done

    @property
    def stored(self) -> int:
        """Chunks stored so far, of documents done and still pending."""
        return self.stored_done + sum(p.stored for p in self._pending.values())

    @property
    def graph_stored(self) -> int:
        """Chunks whose graph is stored so far, of documents done and still pending."""
        return self.stored_done + sum(p.graph for p in self._pending.values())

    @property
    def known_chunks(self) -> int:
        """Chunks the documents loaded so far became, as far as decoded."""
        return self.stored_done + sum(p.chunks or 0 for p in self._pending.values())

    def add(self, source: S) -> None:
        self._pending[source.id] = Pending(source)
        self._last_progress = time.monotonic()  # its own wait starts now

    async def follow(self, loading: Callable[[], bool]) -> None:
        """Poll until no document is pending and ``loading()`` says no more will come."""
        while self._pending or loading():
            if self._pending:
                if await self._poll():
                    self._last_progress = time.monotonic()
                    self._progressed()
                elif time.monotonic() - self._last_progress > self._timeout:
                    self._give_up()
                    continue
            await asyncio.sleep(POLL_INTERVAL)

    async def _poll(self) -> bool:
        """One round of status requests; whether anything moved."""
        ids = list(self._pending)
        moved = False
        for start in range(0, len(ids), STATUS_BATCH):
            try:
                statuses = await self._client.load_status(
                    ids[start:start + STATUS_BATCH], user=self._user,
                    collection=self._collection, flow=self._flow, graph=self.graph)
            except TrustGraphError as error:
                if error.type == "connection":
                    raise
                self._last_error = f"{error.type}: {error.message}"  # reported if it lasts
                return moved
            for status in statuses:
                moved |= self._update(status)
        return moved

    def _update(self, status: dict[str, Any]) -> bool:
        pending = self._pending.get(status["id"])
        if pending is None:
            return False
        state, stored = status["state"], status.get("stored") or 0
        graph = min(status.get("triples") or 0, status.get("entities") or 0)
        if state == "done" and self.graph and status.get("graph") != "done":
            state = "extracting"  # searchable; its graph still on its way
        if state == "done":
            del self._pending[status["id"]]
            self.stored_done += status["chunks"]
            self._finished(pending.source, status["chunks"], None)
        elif state == "failed":
            del self._pending[status["id"]]
            self._finished(pending.source, 0, f"not processed: {status.get('error')}")
        elif state == "unknown":
            del self._pending[status["id"]]
            self._finished(pending.source, 0, "no longer in the library (removed while "
                                              "it was being processed?)")
        else:
            now = (state, status.get("chunks"), stored, graph)
            moved = now != (pending.state, pending.chunks, pending.stored, pending.graph)
            pending.state, pending.chunks, pending.stored, pending.graph = now
            return moved
        return True

    def _give_up(self) -> None:
        for pending in self._pending.values():
            where = (f"{pending.stored} of {pending.chunks} chunks stored"
                     if pending.chunks is not None else "not decoded yet")
            if self.graph and pending.chunks is not None:
                where += f", the graph of {pending.graph}"
            why = f"no progress for {self._timeout:g} s ({where})"
            if self._last_error:
                why += f"; last status error: {self._last_error}"
            self._finished(pending.source, 0, why)
        self._pending.clear()
