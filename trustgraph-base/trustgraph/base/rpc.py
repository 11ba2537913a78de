"""The request/response protocol: what a requester and the runner serving its request
say to each other, and when (docs/protocol.md §4).

A request goes to the service's request topic with the message properties ``id``
(fresh per request) and ``reply-to`` (the requester's own response topic). Every
message answering it carries the same ``id``:

* ``accepted: "1"`` and no payload: a replica has the request. Sent only once the
  request has gone ``Timing.accept_after`` without a record (a first record says as
  much), and again every ``Timing.keep_alive`` while it sends nothing; with
  ``queued: "1"`` while the request waits behind other work of the service (a
  concurrency slot, the model's queue: ``lanes.queued_until``);
* the response records, numbered by ``seq`` ("0", "1", ...) so that a record lost in
  transit is noticed; the last one also carries ``end: "1"``.

The requester sends its request again, every ``Timing.resend`` at most (sooner at
first: ``Timing.first_resend``, doubling), until it is accepted (a
non-persistent topic drops what no consumer is ready for; a runner serves an id it
has in hand or answered lately only once) and gives up after ``Timing.accept_timeout``
(``no-service``). Once accepted, the request fails when no record comes for
``Timing.timeout`` (time spent ``queued`` does not count: a busy service is not a
stuck one), or no word at all (keep-alives included) for ``Timing.liveness`` (a
dead one). A requester that stops listening sends ``Cancel{id}`` on the
cancel topic.

Answers travel on non-persistent topics too, and the broker drops a message for a
consumer whose connection is backed up (a busy requester's process, a large
answer on the same connection). So a requester that has heard nothing for
``Timing.probe_after`` asks again: before acceptance by sending the request again,
after it by a ``probe`` (the id, no payload: a probe is never served as a request),
saying how many records it has (``seq``). A runner that has the request in hand
says ``accepted`` at once; one that answered it lately sends the answer's records
from ``seq`` again (``reply.Kept``), and the requester ignores a record it has.

``Call`` is one request at its requester, driven by the bus ``Requester`` and the
in-process ``LocalRequester`` alike; its answer at the serving runner is a
``reply.Reply``.
"""
import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..schema import Error

# Message properties.
ID, REPLY_TO, SEQ, ACCEPTED, END = "id", "reply-to", "seq", "accepted", "end"
QUEUED = "queued"  # on an ``accepted`` marker: the request waits behind others
PROBE = "probe"  # on a request without payload: "where is my answer?"
YES = "1"

# Records waiting for a caller that has stopped reading; past this the request fails
# rather than holding memory for a reader that is not there.
MAX_PENDING = 10_000


@dataclass(frozen=True)
class Timing:
    """Every time the protocol keeps, in seconds. What depends on what is written
    here once: ``liveness`` is derived from ``keep_alive``; ``accept_after`` must stay
    under ``resend``."""

    timeout: float = 120.0  # TG_REQUEST_TIMEOUT: the longest wait for a record, once accepted
    # A request that nobody has accepted is sent again after ``first_resend``, then
    # after twice as long each time, up to every ``resend``: a flow just started is
    # subscribed within a few hundred ms, and its first request should not wait a
    # whole second for that; a service that is down is not asked more than before.
    first_resend: float = 0.2
    resend: float = 1.0
    accept_timeout: float = 5.0  # and it is given up after this: no processor serves it
    # A runner says it still has a request that sent nothing since, this often.
    # Responses travel on non-persistent topics, which drop what is in flight when the
    # broker restarts: a requester takes ``beats`` missed keep-alives as its answer
    # lost, rather than waiting out ``timeout`` for a record that will never come.
    keep_alive: float = 2.0
    beats: int = 5
    # How long a request goes without a record before its requester is told that a
    # replica has it. The first record says so too, so a request answered sooner (a
    # store query, an embedding, RAG's sources) sends no marker: that was a message
    # and a wake-up of the requester's process on every hop of a RAG answer's path to
    # the LLM (~2-4 ms in all).
    accept_after: float = 0.05
    # A service that answered its requester within ``recently_heard`` is running: when
    # it is slow to take a request (its process starved of CPU beside heavy work, or
    # stopped a while), the request waits ``busy_accept_timeout`` for it, re-sent every
    # ``resend``, rather than failing as ``no-service`` after ``accept_timeout`` (graph
    # questions ended in that error beside a CPU-heavy neighbour). Well under
    # ``timeout``: a request lost with a broker restart is still given up soon enough
    # for its pipeline stage to send it again.
    recently_heard: float = 60.0
    busy_accept_timeout: float = 20.0

    def __post_init__(self) -> None:
        if not self.accept_after < min(self.first_resend, self.resend):
            # else deferring the marker re-sends
            raise ValueError(f"accept_after ({self.accept_after}) must be under "
                             f"first_resend ({self.first_resend}) and resend "
                             f"({self.resend}), or requests are sent twice")

    @property
    def liveness(self) -> float:
        """The longest a requester waits without a word from the service."""
        return self.beats * self.keep_alive

    @property
    def probe_after(self) -> float:
        """How long an accepted request goes without a word before its requester
        asks after it (then again every ``keep_alive``): a keep-alive and a half, so
        that a keep-alive that is only late does not cause one."""
        return 1.5 * self.keep_alive

    @property
    def kept_for(self) -> float:
        """How long a runner keeps an answer to send again: the longest its requester
        may still be asking after it."""
        return max(self.liveness, self.accept_timeout, self.busy_accept_timeout)


TIMING = Timing()  # the protocol's own; processors set ``timeout`` from their settings


class RequestTimeout(Exception):
    pass


class ServiceError(Exception):
    """A service answered with ``error``; ``error`` holds its type and message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.type}: {error.message}")
        self.error = error


class Call:
    """One request at its requester: the records that arrived and are not yet read,
    and what the protocol makes of them, of markers and of silence."""

    __slots__ = ("timing", "service", "flow", "finished", "accepted", "_frames", "_seq",
                 "_failure", "_arrived", "_loop", "_heard", "_alive_at", "_quiet_until",
                 "_resend_at", "_resend_every", "_waited", "_give_up", "_timer", "_timer_at",
                 "_probed_at")

    def __init__(self, timing: Timing, service: str, flow: str,
                 accept_timeout: float | None = None) -> None:
        """``accept_timeout``: how long it may wait to be accepted, when not the
        timing's own (a service heard from lately waits longer: ``Timing``)."""
        self.timing = timing
        self.service, self.flow = service, flow
        self.finished = False  # the final record has been read
        self.accepted = False  # a replica has the request
        self._frames: deque[Any] = deque()  # ``Frame``s (only bytes ones on the bus)
        self._seq = 0  # the ``seq`` the next record must carry
        self._failure: Exception | None = None
        self._arrived = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self._heard = False  # records were read since the last wait
        self._alive_at = now  # the last word from the service
        self._quiet_until = 0.0  # when the next record is due (once accepted)
        self._resend_every = min(timing.first_resend, timing.resend)
        self._resend_at = now + self._resend_every
        self._waited = timing.accept_timeout if accept_timeout is None else accept_timeout
        self._give_up = now + self._waited
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._probed_at = -float("inf")  # when it last asked after its answer

    @property
    def received(self) -> int:
        """The records that have arrived (the ``seq`` of the next one)."""
        return self._seq

    # -- what the transport hands over ------------------------------------------------

    def accept(self, queued: bool = False) -> None:
        """An ``accepted`` marker or a keep-alive: a replica has it and is alive;
        ``queued``: it waits behind other work, so the wait for a record starts
        again (a busy service is given ``timeout`` from when it says so last)."""
        self._alive_at = self._loop.time()
        if not self.accepted:
            self.accepted = True
            self._quiet_until = self._alive_at + self.timing.timeout
        if queued:
            self._quiet_until = max(self._quiet_until, self._alive_at + self.timing.timeout)

    def put(self, frame: tuple[Any, bool], seq: int | None) -> None:
        """A record (a ``relay.Frame``: its JSON, or an in-process ``Delta``, and whether
        it is the final one); ``seq`` its number on the bus (None: in-process, or a
        sender that numbers nothing)."""
        if self._failure is not None:
            return
        if seq is not None and seq < self._seq:
            return  # sent again after it was asked after, and had arrived after all
        if seq is not None and seq != self._seq:
            self.fail(ServiceError(Error(
                type="responses-lost",
                message=f"{seq - self._seq} response record(s) lost in transit "
                        f"(was the broker restarted?)")))
            return
        self._seq += 1
        if len(self._frames) >= MAX_PENDING:
            self.fail(ServiceError(Error(type="overflow",
                                         message="the caller is not reading its responses")))
            return
        self.accepted = True
        self._frames.append(frame)
        self._arrived.set()

    def fail(self, error: Exception) -> None:
        self._failure = error
        self._arrived.set()

    # -- what the requester asks -------------------------------------------------------

    async def next(self) -> list[Any] | None:
        """The records that have arrived (all of them, in order), waiting for some as
        long as the protocol allows; None when the requester is to ask again: send
        the request again (nobody has accepted it yet), or a probe (accepted, and
        quiet for ``probe_after``: its answer may have been lost). Raises
        ``ServiceError`` (``no-service``, records lost) or ``RequestTimeout`` (a
        service gone quiet)."""
        while True:
            if self._frames:
                batch = list(self._frames)
                self._frames.clear()
                self.finished = batch[-1][1]
                self._heard = True
                return batch
            if self._failure is not None:
                raise self._failure
            now = self._loop.time()
            if self._heard:  # records were read: the next is due from now
                self._heard = False
                self._alive_at, self._quiet_until = now, now + self.timing.timeout
            if self.accepted:
                lost_at = self._alive_at + self.timing.liveness
                if now >= self._quiet_until:
                    raise RequestTimeout(f"{self.service} on flow {self.flow} sent nothing "
                                         f"for {self.timing.timeout:g} s")
                if now >= lost_at:
                    raise self._lost()
                probe_at = max(self._alive_at + self.timing.probe_after,
                               self._probed_at + self.timing.keep_alive)
                if now >= probe_at:
                    self._probed_at = now
                    return None
                deadline = min(self._quiet_until, lost_at, probe_at)
            else:
                if now >= self._give_up:
                    raise self._no_service()
                if now >= self._resend_at:
                    self._resend_every = min(2 * self._resend_every, self.timing.resend)
                    self._resend_at = now + self._resend_every
                    return None
                deadline = min(self._resend_at, self._give_up)
            # Until something arrives, or the deadline. One timer per call, moved only
            # when it would ring too late, not set and cancelled for every wait: a
            # stream waits once per delta, and a timer per wait cost ~4 µs of a
            # delta's ~40-60 µs in the gateway. A ring before the deadline (it moved
            # on) wakes this loop, which finds nothing due and waits again.
            self._arrived.clear()
            if self._timer is None or self._timer_at > deadline:
                self.close()
                self._timer = self._loop.call_at(deadline, self._ring)
                self._timer_at = deadline
            await self._arrived.wait()

    def close(self) -> None:
        """The request is over: its timer goes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ring(self) -> None:
        self._timer = None
        self._arrived.set()

    def _lost(self) -> RequestTimeout:
        return RequestTimeout(
            f"{self.service} on flow {self.flow} went quiet: not a word for "
            f"{self.timing.liveness:g} s, not even that it still has the request (it "
            f"stopped, or its records were lost in transit: was the broker restarted?)")

    def _no_service(self) -> ServiceError:
        return ServiceError(Error(
            type="no-service",
            message=f"no {self.service} processor took the request on flow {self.flow} "
                    f"within {self._waited:g} s: is it running (tg-start, or "
                    f"tg-run {self.service}) and is the flow started?"))
