"""The serving runner's side of the request/response protocol (``rpc``): a request's
answer (``Reply``; ``BusReply`` over the bus, ``local.LocalReply`` straight into the
caller's ``Call``), the producers answers go through, and the ids a runner has
answered."""
import asyncio
import logging
from collections import OrderedDict
from typing import Any

from ..pubsub import Bus
from ..schema import Response
from .rpc import ACCEPTED, END, ID, QUEUED, SEQ, YES, Timing

log = logging.getLogger(__name__)

# Ids a runner remembers having answered, so that a re-send arriving after the
# answer is not served twice.
REMEMBERED = 4096


class Reply:
    """One request's answer at its serving runner: the deferred ``accepted`` marker,
    keep-alives while it sends nothing, then its records in order, the last final.
    Subclasses carry it: ``_accept`` says "accepted" (and ``queued`` while
    ``queued``), ``send`` sends a record or a delta (calling ``_sending`` first)."""

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

    async def send(self, item: Any, final: bool) -> None:
        raise NotImplementedError

    async def _accept(self) -> None:
        raise NotImplementedError

    def _sending(self) -> None:
        if self._marker is not None:
            self.close()
        self._quiet = False

    def _mark(self) -> None:
        self._marker = None
        task = asyncio.ensure_future(self._accept_quietly())
        _MARKING.add(task)
        task.add_done_callback(_MARKING.discard)

    async def _accept_quietly(self) -> None:
        try:
            await self._accept()
        except Exception as error:  # the broker away: keep-alives and re-sends follow
            log.debug("accepted marker not sent: %s", error)


_MARKING: set[asyncio.Future] = set()  # markers being sent (held, so none is collected)


class BusReply(Reply):
    """The answer over the bus, on the requester's reply topic."""

    __slots__ = ("_producer", "_model", "_id", "_seq")

    def __init__(self, producer: Any, model: type[Response], request_id: str) -> None:
        super().__init__()
        self._producer = producer
        self._model = model
        self._id = request_id
        self._seq = 0

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
            await self._producer.send(data, properties)  # its receipt: all went out
        else:
            await self._producer.post(data, properties)


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
