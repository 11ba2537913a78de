"""One model, many concurrent requests: runs on worker threads, in shared batches,
interactive work first.

The model runs off the event loop because one run takes milliseconds to seconds
of CPU, which on the event loop would stall every other request of the process.
Runs go side by side, ``runs`` at once (one per core by default), each on one
onnxruntime thread: measured on 2 cores, a chunk costs ~12 % less CPU run alone
on one thread, two runs side by side, than on two threads one run at a time, and
~20 % less in runs of one chunk than of four (minilm/provider.py).

Requests are cut into pieces of at most ``batch`` long texts (or ``short_batch``
short ones), a request's texts in order of length first (a run is padded to its
longest text). Each piece waits in its lane (``trustgraph.base.lanes``: a
question's embedding is interactive, a pipeline stage's is bulk):

* interactive pieces go first, short ones (a question) before long ones, and one
  more run than ``runs`` is theirs alone: a question waits for no bulk run, only
  shares the cores with those under way, and on Linux bulk runs go on threads of
  lower priority (``lower_thread_priority``), so a question's run takes this
  process's share of the cores first;
* bulk pieces go in order of arrival, short (entity labels) and long (chunks)
  alike, so neither starves the other; a bulk run takes pieces of one kind only
  (a short text is not padded to a chunk's length): up to ``short_batch`` short
  texts, or up to ``batch`` long ones, the oldest and those nearest it in length.

A run never waits for more work to arrive. While a request waits for its first
run it is marked queued (``queued_until``): its requester does not count that
wait against its timeout.
"""
import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from trustgraph.base import BULK, INTERACTIVE, current_lane, queued_until
from trustgraph.base.lanes import Lane, lower_thread_priority

SHORT_TEXT = 300  # characters: about 60-80 tokens
SHORT_BATCH = 32
LOOKAHEAD = 64  # waiting long pieces looked at to find ones alike in length

_arrivals = itertools.count()


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future
    started: Callable[[], None]  # its first run began: no longer queued
    vectors: np.ndarray | None = None
    pieces_left: int = 0


@dataclass(eq=False)
class _Piece:
    request: _Request
    indexes: list[int]  # of its texts in the request
    length: int  # of its longest text, as ``Batcher.length`` measures
    arrival: int = field(default_factory=lambda: next(_arrivals))

    @property
    def size(self) -> int:
        return len(self.indexes)

    @property
    def texts(self) -> list[str]:
        return [self.request.texts[i] for i in self.indexes]


class _Lane:
    """A lane's waiting pieces: short texts and long ones apart."""

    def __init__(self) -> None:
        self.short: deque[_Piece] = deque()
        self.long: deque[_Piece] = deque()

    def __bool__(self) -> bool:
        return bool(self.short or self.long)


class Batcher:
    def __init__(self, run: Callable[[list[str]], np.ndarray], batch: int,
                 short_batch: int = SHORT_BATCH, length: Callable[[str], int] = len,
                 runs: int = 1) -> None:
        """``run`` embeds a list of texts (thread-safe when ``runs`` > 1); ``length``
        measures a text as the model pays for it (its tokens); ``runs``: bulk runs
        at once (interactive work has one more)."""
        self._run = run
        self._length = length
        self._batch = max(1, batch)
        self._short_batch = max(self._batch, short_batch)
        self._lanes: dict[Lane, _Lane] = {INTERACTIVE: _Lane(), BULK: _Lane()}
        self._bulk_runs = max(1, runs)
        self._running: dict[Lane, int] = {INTERACTIVE: 0, BULK: 0}
        self._executors = {
            INTERACTIVE: ThreadPoolExecutor(self._bulk_runs + 1,
                                            thread_name_prefix="embeddings-interactive"),
            BULK: ThreadPoolExecutor(self._bulk_runs, thread_name_prefix="embeddings-bulk",
                                     initializer=lower_thread_priority)}
        self._tasks: set[asyncio.Task] = set()

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        started = queued_until()
        request = _Request(texts, asyncio.get_running_loop().create_future(), started)
        lane = self._lanes[current_lane()]
        # Short texts first, then long ones by what the model pays for them.
        lengths = [(1, self._length(t)) if len(t) > SHORT_TEXT else (0, len(t))
                   for t in texts]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        for start in range(0, len(order), self._batch):
            piece = _Piece(request, order[start:start + self._batch], 0)
            if max(lengths[i][0] for i in piece.indexes) == 0:
                lane.short.append(piece)
            else:
                piece.length = max(lengths[i][1] for i in piece.indexes)
                lane.long.append(piece)
            request.pieces_left += 1
        self._start_runs()
        try:
            return await request.future  # cancelling this drops the request's pieces
        finally:
            started()

    def _start_runs(self) -> None:
        """As many runs as may go now: interactive ones up to ``runs`` + 1 at once,
        bulk ones up to ``runs``."""
        while sum(self._running.values()) <= self._bulk_runs:
            lane: Lane
            if self._lanes[INTERACTIVE]:
                lane = INTERACTIVE
            elif self._lanes[BULK] and self._running[BULK] < self._bulk_runs:
                lane = BULK
            else:
                return
            pieces = self._next_run(self._lanes[lane], lane)
            if not pieces:
                if not self._lanes[lane]:
                    return
                continue  # only cancelled pieces were taken off
            self._running[lane] += 1
            task = asyncio.create_task(self._run_then_more(pieces, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _next_run(self, waiting: _Lane, lane: Lane) -> list[_Piece]:
        """The next run of a lane: interactive short texts first; in bulk, whichever
        kind waited longest."""
        if waiting.short and (lane == INTERACTIVE or not waiting.long
                              or waiting.short[0].arrival < waiting.long[0].arrival):
            return self._take(waiting.short, self._short_batch)
        return self._take_alike(waiting.long, self._batch)

    async def _run_then_more(self, pieces: list[_Piece], lane: Lane) -> None:
        try:
            await self._run_pieces(pieces, self._executors[lane])
        finally:
            self._running[lane] -= 1
            self._start_runs()

    async def _run_pieces(self, pieces: list[_Piece], executor: ThreadPoolExecutor) -> None:
        """One run; if it fails, each piece again on its own, so that a text the
        model cannot take fails only its own request."""
        texts = [t for p in pieces for t in p.texts]
        for piece in pieces:
            piece.request.started()
        try:
            vectors = await asyncio.get_running_loop().run_in_executor(
                executor, self._run, texts)
            self._deliver(pieces, vectors)
        except Exception as error:
            if len(pieces) > 1:
                for piece in pieces:
                    if not piece.request.future.done():
                        await self._run_pieces([piece], executor)
            elif not pieces[0].request.future.done():
                pieces[0].request.future.set_exception(error)

    @staticmethod
    def _take(queue: deque[_Piece], limit: int) -> list[_Piece]:
        """The next run: up to ``limit`` texts, skipping pieces of requests that
        were cancelled or have failed."""
        pieces, count = [], 0
        while queue and count + queue[0].size <= limit:
            piece = queue.popleft()
            if not piece.request.future.done():
                pieces.append(piece)
                count += piece.size
        return pieces

    @staticmethod
    def _take_alike(queue: deque[_Piece], limit: int) -> list[_Piece]:
        """The next run of long texts: the oldest piece, and among the next few
        the pieces nearest it in length. A run is padded to its longest text, so
        runs of alike lengths waste less; the oldest always goes, so none waits
        for ever."""
        pieces = Batcher._take(queue, min(limit, queue[0].size))
        if not pieces:
            return pieces
        count = pieces[0].size
        nearby = sorted(itertools.islice(queue, LOOKAHEAD),
                        key=lambda p: abs(p.length - pieces[0].length))
        for piece in nearby:
            size = piece.size
            if count + size <= limit:
                queue.remove(piece)
                if not piece.request.future.done():
                    pieces.append(piece)
                    count += size
        return pieces

    @staticmethod
    def _deliver(pieces: list[_Piece], vectors: np.ndarray) -> None:
        row = 0
        for piece in pieces:
            request, n = piece.request, piece.size
            if request.vectors is None:
                request.vectors = np.empty((len(request.texts), vectors.shape[1]), vectors.dtype)
            request.vectors[piece.indexes] = vectors[row:row + n]
            row += n
            request.pieces_left -= 1
            if request.pieces_left == 0 and not request.future.done():
                request.future.set_result(request.vectors)

