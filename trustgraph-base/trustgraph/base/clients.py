"""The services a processor calls, by name, on one flow (``ctx.clients``): an
in-process ``LocalRequester`` for a service this process serves, else a bus
``Requester`` made on first use. Both are ``ServiceClient``s."""
import asyncio

from ..pubsub import Bus
from .local import LocalRequester, LocalServices
from .requester import Requester, ServiceClient
from .rpc import Timing


class Clients:
    """The requesters one processor uses on one flow: an in-process one for a
    service this process serves (``local``), else a bus one created on first use."""

    def __init__(self, bus: Bus, flow: str, owner: str, timing: Timing,
                 local: LocalServices | None = None) -> None:
        self._bus = bus
        self._flow = flow
        self._owner = owner
        self._timing = timing
        self._local = local
        self._requesters: dict[str, asyncio.Future[Requester]] = {}

    async def get(self, service: str) -> ServiceClient:
        """A ``Requester``, or a ``LocalRequester`` for a service of this process."""
        # Looked up on every call: a group's members start (and stop) in any order.
        runner = self._local.get(service, self._flow) if self._local is not None else None
        if runner is not None:
            return LocalRequester(runner, self._timing)
        if service not in self._requesters:
            requester = Requester(self._bus, service, self._flow, self._owner, self._timing)
            self._requesters[service] = asyncio.ensure_future(_started(requester))
        return await asyncio.shield(self._requesters[service])


async def _started(requester: Requester) -> Requester:
    await requester.start()
    return requester
