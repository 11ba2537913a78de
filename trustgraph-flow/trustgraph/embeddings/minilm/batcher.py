"""One model, many concurrent requests: runs on one thread, in shared batches.

The model runs on its own thread because one run takes milliseconds to seconds
of CPU, which on the event loop would stall every other request of the process.
One thread, not a pool: onnxruntime already spreads a run over the cores, and
two runs at once would only fight over them.

Requests are cut into pieces of at most ``batch`` texts, a request's texts in order
of length first (a run is padded to its longest text, so a piece of alike lengths
wastes less; a request of many chunks would otherwise cost ~15 % more CPU per
chunk than the same chunks sent one per request). Pieces of short texts
(a user's query, an entity label) go before pieces of long ones (document
chunks) and run apart from them: a query then waits for at most the run already
under way, and is not padded to a chunk's length. Each run takes waiting pieces
of one kind: up to ``short_batch`` short texts, first come first served, or up to
``batch`` long ones, the oldest and those nearest it in length. A run never waits
for more work to arrive.

Why those sizes (measured with all-MiniLM-L6-v2 on 2 cores, docs/embeddings.md):
a chunk costs the least CPU in runs of 1-4 (runs of 16-32 chunks cost 25-30 %
more per chunk: their activations outgrow the caches), while a short query costs
half as much in a run of 20 as alone (a run has a fixed cost). Small chunk runs
also bound how long a query waits behind ingestion. (The model splits what it is
given into runs by padded tokens as well; see ``MiniLm.embed``.)
"""
import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

SHORT_TEXT = 300  # characters: about 60-80 tokens
SHORT_BATCH = 32
LOOKAHEAD = 64  # waiting long pieces looked at to find ones alike in length


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future
    vectors: np.ndarray | None = None
    pieces_left: int = 0


@dataclass(eq=False)
class _Piece:
    request: _Request
    indexes: list[int]  # of its texts in the request
    length: int  # of its longest text, as ``Batcher.length`` measures

    @property
    def size(self) -> int:
        return len(self.indexes)

    @property
    def texts(self) -> list[str]:
        return [self.request.texts[i] for i in self.indexes]


class Batcher:
    def __init__(self, run: Callable[[list[str]], np.ndarray], batch: int,
                 short_batch: int = SHORT_BATCH,
                 length: Callable[[str], int] = len) -> None:
        """``length`` measures a text as the model pays for it (its tokens)."""
        self._run = run
        self._length = length
        self._batch = max(1, batch)
        self._short_batch = max(self._batch, short_batch)
        self._short: deque[_Piece] = deque()
        self._long: deque[_Piece] = deque()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="embeddings-model")
        self._worker: asyncio.Task | None = None

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        request = _Request(texts, asyncio.get_running_loop().create_future())
        # Short texts first, then long ones by what the model pays for them.
        lengths = [(1, self._length(t)) if len(t) > SHORT_TEXT else (0, len(t))
                   for t in texts]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        for start in range(0, len(order), self._batch):
            piece = _Piece(request, order[start:start + self._batch], 0)
            if max(lengths[i][0] for i in piece.indexes) == 0:
                self._short.append(piece)
            else:
                piece.length = max(lengths[i][1] for i in piece.indexes)
                self._long.append(piece)
            request.pieces_left += 1
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        return await request.future  # cancelling this drops the request's pieces

    async def _work(self) -> None:
        while self._short or self._long:
            if self._short:
                pieces = self._take(self._short, self._short_batch)
            else:
                pieces = self._take_alike(self._long, self._batch)
            if pieces:
                await self._run_pieces(pieces)

    async def _run_pieces(self, pieces: list[_Piece]) -> None:
        """One run; if it fails, each piece again on its own, so that a text the
        model cannot take fails only its own request."""
        texts = [t for p in pieces for t in p.texts]
        try:
            vectors = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._run, texts)
            self._deliver(pieces, vectors)
        except Exception as error:
            if len(pieces) > 1:
                for piece in pieces:
                    if not piece.request.future.done():
                        await self._run_pieces([piece])
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
