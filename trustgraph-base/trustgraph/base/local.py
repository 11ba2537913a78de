"""Calling a service served in this very process, without the bus.

Processors served together in one process (a process group, ``tg-run
prompt+text-completion``) share one ``LocalServices``: each registers the services it
serves there, and ``Clients.get`` gives a caller a ``LocalRequester`` for those instead
of a bus ``Requester``. Why: every bus hop is a send, a broker pass and a receive per
record, ~1 ms of cross-process wake-ups before the first token; within one event loop
a record is handed over directly.

What does not change is everything a caller or a service can see: the request is
encoded and decoded as on the bus (a bad one is a ``bad-request`` error); the serving
runner's backlog and concurrency limit apply; the handler's records come back as
frames in batches of what is waiting, ending with exactly one final record (an
unexpected exception becomes the service's failure record); the protocol is the
bus's (``rpc.Call``: a service quiet for the caller's timeout is a
``RequestTimeout``); and leaving the loop early cancels the handler at once,
closing its LLM stream. What differs: a delta is handed over as it is
(``relay.Delta``), not encoded and decoded again at every hop.
"""
import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator
from typing import Any, Protocol

from ..schema import Error, Record, Response, encode
from .relay import Frame
from .reply import Reply
from .requester import Calls
from .rpc import TIMING, Call, ServiceError, Timing

log = logging.getLogger(__name__)


class Served(Protocol):
    """What is served: a ``Service``'s name and the ``error.type`` of its failures."""

    @property
    def name(self) -> str: ...

    @property
    def failure_type(self) -> str: ...


class Runner(Protocol):
    """A ``service.ServiceRunner``, as far as a call in this process uses one (a
    Protocol, so that the clients handlers are given need not import the runner)."""

    @property
    def service(self) -> Served: ...

    @property
    def flow(self) -> str: ...

    def serve_local(self, data: bytes, request_id: str, reply: Reply) -> asyncio.Task: ...


class LocalServices:
    """The (service, flow) pairs served in this process, by the runner serving each."""

    def __init__(self) -> None:
        self._runners: dict[tuple[str, str], Runner] = {}

    def add(self, runner: Runner) -> None:
        key = (runner.service.name, runner.flow)
        if key in self._runners:
            # Two processors of one group serving the same thing: the first keeps the
            # in-process calls, the bus shares the rest between them as replicas.
            log.warning("%s on flow %s is served twice in this process", *key)
            return
        self._runners[key] = runner

    def remove(self, runner: Runner) -> None:
        key = (runner.service.name, runner.flow)
        if self._runners.get(key) is runner:
            del self._runners[key]

    def get(self, service: str, flow: str) -> Runner | None:
        return self._runners.get((service, flow))

    def names(self) -> list[str]:
        return sorted(f"{service}:{flow}" for service, flow in self._runners)


class LocalReply(Reply):
    """The answer to a request made in this process, straight into its ``Call``.
    Records are encoded as on the bus (the caller decodes them into its own model);
    a delta is handed over as it is: a token is encoded once, when it leaves the
    process."""

    __slots__ = ("_call", "final")

    def __init__(self, call: Call) -> None:
        super().__init__()
        self._call = call
        self.final = False

    async def _accept(self) -> None:
        self._call.accept(self.queued > 0)

    async def send(self, item: Any, final: bool) -> None:
        self._sending()
        self.final = final
        self._call.put((item.encoded() if isinstance(item, Response) else item, final),
                       None)


class LocalRequester(Calls):
    """``frames`` / ``stream`` / ``call`` answered by a runner in this process."""

    def __init__(self, runner: Runner, timing: Timing = TIMING) -> None:
        self.service = runner.service.name
        self.flow = runner.flow
        self.timing = timing
        self._runner = runner

    async def frames(self, request: Record, request_id: str | None = None
                     ) -> AsyncGenerator[list[Frame], None]:
        """Yield the response frames in batches of what has arrived, ending after
        the final one. Leaving early cancels the handler and waits until it has
        closed (its LLM stream with it)."""
        call = Call(self.timing, self.service, self.flow)
        call.accept()  # the runner has it: nothing is sent again or lost in a process
        reply = LocalReply(call)
        task = self._runner.serve_local(encode(request), request_id or uuid.uuid4().hex,
                                        reply)
        task.add_done_callback(lambda _: self._ended(reply, call))
        try:
            while not call.finished:
                batch = await call.next()
                if batch is not None:  # None: a probe is due; in a process nothing is lost
                    yield batch
        finally:
            call.close()
            if not call.finished and not task.done():
                task.cancel()
                await asyncio.wait({task})

    def _ended(self, reply: LocalReply, call: Call) -> None:
        """The serving task ended: without a final record it was cancelled from
        outside (its processor stopping, or a cancel for its id); say so now rather
        than leave the caller to time out."""
        if not reply.final:
            call.fail(ServiceError(Error(
                type=self._runner.service.failure_type,
                message=f"{self.service} on flow {self.flow} stopped before answering "
                        f"(its processor stopping, or the request cancelled)")))
