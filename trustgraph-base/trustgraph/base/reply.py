"""The serving runner's side of the request/response protocol (``rpc``): a request's
answer (``Reply``; ``BusReply`` over the bus, ``local.LocalReply`` straight into the
caller's ``Call``), the producers answers go through, the ids a runner has
answered, and the answers it keeps to send again should they be lost (``Kept``)."""
import asyncio
import logging
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any

from ..pubsub import Bus
from ..schema import Response
from .rpc import ACCEPTED, END, ID, QUEUED, SEQ, YES, Timing

log = logging.getLogger(__name__)

# Ids a runner remembers having answered, so that a re-send arriving after the
# answer is not served twice.
REMEMBERED = 4096
# An answer's records are kept to be sent again up to this size (a longer stream's
# loss still fails its request: ``responses-lost``, or the liveness), and a runner's
# kept answers up to KEPT_BYTES in all, the oldest forgotten first.
KEPT_ANSWER_BYTES = 1024 * 1024
KEPT_BYTES = 16 * 1024 * 1024


class Reply:
    """One request's answer at its serving runner: the deferred ``accepted`` marker,
    keep-alives while it sends nothing, then its records in order, the last final.
    Subclasses carry it: ``_accept`` says "accepted" (and ``queued`` while
    ``queued``), ``send`` sends a record or a delta (calling ``_sending`` first),
    ``_again`` answers a requester that asks after it."""

    __slots__ = ("_marker", "_quiet", "queued")

    def __init__(self) -> None:
        self._marker: asyncio.TimerHandle | None = None
        self._quiet = True  # nothing sent since the last keep-alive
        self.queued = 0  # waits it is in now, behind other work (``lanes.queued_until``)

    def open(self, timing: Timing) -> None:
        """Serving starts: unless a record goes first, a marker in ``accept_after``."""
        self._marker = asyncio.get_running_loop().call_later(timing.accept_after,
                                                             self._mark)

    async def keep_alive(self) -> None:
        """``accepted`` again, unless records went out since the last keep-alive."""
        if self._quiet:
            await self._accept()
        self._quiet = True

    def close(self) -> None:
        if self._marker is not None:
            self._marker.cancel()
            self._marker = None

    def again(self, seq: int) -> None:
        """Its requester asked after it, having ``seq`` records: answered without
        waiting, as the runner's receive loop may not wait."""
        _spawn(self._again(seq))

    @property
    def kept_bytes(self) -> int | None:
        """The size of the answer kept to send again (``Kept``); None: nothing kept."""
        return None

    async def send(self, item: Any, final: bool) -> None:
        raise NotImplementedError

    async def _again(self, seq: int) -> None:
        await self._accept()

    async def _accept(self) -> None:
        raise NotImplementedError

    def _sending(self) -> None:
        if self._marker is not None:
            self.close()
        self._quiet = False

    def _mark(self) -> None:
        self._marker = None
        _spawn(self._accept())


def _spawn(sending: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(_quietly(sending))
    _SENDING.add(task)
    task.add_done_callback(_SENDING.discard)


async def _quietly(sending: Coroutine[Any, Any, None]) -> None:
    try:
        await sending
    except Exception as error:  # the broker away: keep-alives and asking again follow
        log.debug("accepted marker or answer not sent: %s", error)


_SENDING: set[asyncio.Future] = set()  # markers and answers being sent (held, not collected)


class BusReply(Reply):
    """The answer over the bus, on the requester's reply topic."""

    __slots__ = ("_producer", "_model", "_id", "_seq", "_sent", "_sent_bytes", "_ended")

    def __init__(self, producer: Any, model: type[Response], request_id: str) -> None:
        super().__init__()
        self._producer = producer
        self._model = model
        self._id = request_id
        self._seq = 0
        # What went out, to send again should it be lost (None: too long to keep).
        self._sent: list[tuple[bytes, dict[str, str]]] | None = []
        self._sent_bytes = 0
        self._ended = False

    @property
    def kept_bytes(self) -> int | None:
        return self._sent_bytes if self._ended and self._sent is not None else None

    async def _accept(self) -> None:
        properties = {ID: self._id, ACCEPTED: YES}
        if self.queued:
            properties[QUEUED] = YES
        await self._producer.post(b"", properties)

    async def send(self, item: Any, final: bool) -> None:
        """A record, or a ``Delta`` (written as this service's delta record)."""
        self._sending()
        properties = {ID: self._id, SEQ: str(self._seq)}
        self._seq += 1
        data = item.encoded() if isinstance(item, Response) else item.encoded_as(self._model)
        if final:
            properties[END] = YES
            self._ended = True
        if self._sent is not None:
            self._sent_bytes += len(data)
            self._sent.append((data, properties))
            if self._sent_bytes > KEPT_ANSWER_BYTES:
                self._sent = None
        if final:
            await self._producer.send(data, properties)  # its receipt: all went out
        else:
            await self._producer.post(data, properties)

    async def _again(self, seq: int) -> None:
        """The records from ``seq`` again, or, while there are none, ``accepted``."""
        if self._sent is not None and seq < len(self._sent):
            for data, properties in self._sent[seq:]:
                await self._producer.post(data, properties)
        elif not self._ended:
            await self._accept()


# From this many requests in hand in a process, a new request is answered through its
# reply topic's batched producer (``bus.Producer``). Batching what one turn of the
# event loop sends halves the broker's CPU per token when many streams run; a lone
# stream pays ~0.2 ms per request for it (the flush of each turn, measured in one
# process), so a request that has the process nearly to itself goes unbatched.
BATCHED_FROM = 16


class ReplyProducers:
    """Two producers per reply topic, batched and not, each created on first use and
    kept. A request's records all go through one of them, so they stay in order."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._producers: dict[tuple[str, bool], asyncio.Future] = {}

    async def reply(self, topic: str, model: type[Response], request_id: str,
                    batched: bool = False) -> BusReply:
        key = (topic, batched)
        if key not in self._producers:
            self._producers[key] = asyncio.ensure_future(
                self._bus.producer(topic, batched=batched))
        try:
            producer = await asyncio.shield(self._producers[key])
        except Exception:
            self._producers.pop(key, None)
            raise
        return BusReply(producer, model, request_id)


class Kept:
    """The answers a runner sent lately, to send again to a requester that asks after
    one (``Reply.again``): each for ``keep_for`` seconds, and ``budget`` bytes of
    them in all, the oldest forgotten first."""

    OVERHEAD = 512  # bytes counted per answer besides its records: many are tiny

    def __init__(self, keep_for: float, budget: int = KEPT_BYTES) -> None:
        self._replies: OrderedDict[str, tuple[float, int, Reply]] = OrderedDict()
        self._keep_for = keep_for
        self._budget = budget
        self._bytes = 0

    def add(self, request_id: str, reply: Reply) -> None:
        if reply.kept_bytes is None:
            return
        now = asyncio.get_running_loop().time()
        while self._replies and next(iter(self._replies.values()))[0] <= now:
            self._forget_oldest()
        size = reply.kept_bytes + self.OVERHEAD
        self._replies[request_id] = (now + self._keep_for, size, reply)
        self._bytes += size
        while self._bytes > self._budget:
            self._forget_oldest()

    def get(self, request_id: str) -> Reply | None:
        kept = self._replies.get(request_id)
        if kept is None or kept[0] <= asyncio.get_running_loop().time():
            return None
        return kept[2]

    def _forget_oldest(self) -> None:
        _, (_, size, _) = self._replies.popitem(last=False)
        self._bytes -= size


class Answered:
    """The ids a runner answered lately (``REMEMBERED`` of them)."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def add(self, request_id: str) -> None:
        self._ids[request_id] = None
        if len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._ids
