"""The requesting side of a request/response service.

One ``Requester`` per (service, flow) per process. It owns a response topic of its
own (so responses reach only the process that asked), one receive loop that routes
each response to the waiting request by the message property ``id``, and the
cancel that goes out when a caller stops listening before the final record.
"""
import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

from ..pubsub import Bus, Message
from ..schema import CANCEL_TOPIC, Cancel, Error, Record, Response, decode, encode
from ..schema import request_topic, response_topic

log = logging.getLogger(__name__)

# Responses waiting for a caller that has stopped reading; past this the request
# fails rather than holding memory for a reader that is not there.
MAX_PENDING_RESPONSES = 10_000

Frame = tuple[bytes, bool]  # (record JSON, is the final record)


class RequestTimeout(Exception):
    pass


class ServiceError(Exception):
    """A service answered with ``error``; ``error`` holds its type and message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.type}: {error.message}")
        self.error = error


class Requester:
    def __init__(self, bus: Bus, service: str, flow: str, requester_id: str,
                 timeout: float = 120.0) -> None:
        self.service = service
        self.flow = flow
        self.timeout = timeout
        self._bus = bus
        self._request_topic = request_topic(service, flow)
        self._reply_to = response_topic(service, flow, requester_id)
        self._subscription = requester_id
        self._pending: dict[str, asyncio.Queue[Frame]] = {}
        self._producer = None
        self._cancel_producer = None

    async def start(self) -> None:
        await self._bus.consume(self._reply_to, self._subscription, self._route,
                                name=f"responses {self.service}:{self.flow}")
        self._producer = await self._bus.producer(self._request_topic)
        self._cancel_producer = await self._bus.producer(CANCEL_TOPIC)

    async def _route(self, message: Message) -> None:
        properties = message.properties()
        queue = self._pending.get(properties.get("id", ""))
        if queue is None:
            return  # late response for a request that was cancelled or timed out
        try:
            queue.put_nowait((message.data(), properties.get("end") == "1"))
        except asyncio.QueueFull:
            self._pending.pop(properties["id"], None)
            log.warning("id=%s dropped: caller is not reading its responses",
                        properties["id"])

    async def frames(self, request: Record, request_id: str | None = None
                     ) -> AsyncIterator[list[Frame]]:
        """Send ``request`` and yield its response frames in order, as batches of
        whatever has already arrived, ending after the final frame.

        Leaving the loop early (a break, an exception, a cancelled task) sends a
        cancel for the request, so the service stops and closes its LLM stream.
        """
        request_id = request_id or uuid.uuid4().hex
        queue: asyncio.Queue[Frame] = asyncio.Queue(MAX_PENDING_RESPONSES)
        self._pending[request_id] = queue
        finished = False
        try:
            await self._producer.send(encode(request), properties={
                "id": request_id, "reply-to": self._reply_to})
            while not finished:
                batch = [await self._next(queue, request_id)]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                finished = batch[-1][1]
                yield batch
        finally:
            self._pending.pop(request_id, None)
            if not finished:
                await self._cancel(request_id)

    async def _next(self, queue: asyncio.Queue[Frame], request_id: str) -> Frame:
        if request_id not in self._pending:
            raise ServiceError(Error(type="overflow", message="response consumer too slow"))
        try:
            return await asyncio.wait_for(queue.get(), self.timeout)
        except TimeoutError:
            raise RequestTimeout(
                f"{self.service} on flow {self.flow} sent nothing for {self.timeout:g} s"
            ) from None

    async def _cancel(self, request_id: str) -> None:
        try:
            await asyncio.shield(self._cancel_producer.send(
                encode(Cancel(id=request_id)), properties={"id": request_id}))
        except Exception as error:
            log.warning("id=%s cancel not sent: %s", request_id, error)

    async def stream(self, request: Record, model: type[Response],
                     request_id: str | None = None) -> AsyncIterator[Response]:
        """Yield decoded response records; a record carrying ``error`` raises
        ``ServiceError`` after nothing else could follow it."""
        async for batch in self.frames(request, request_id):
            for data, _ in batch:
                record = decode(model, data)
                if record.error is not None:
                    raise ServiceError(record.error)
                yield record

    async def call(self, request: Record, model: type[Response]) -> Response:
        """One request, its final record (non-streaming use)."""
        last = None
        async for last in self.stream(request, model):
            pass
        return last
