"""``LibrarianClient``: the librarian's three services (``librarian``, ``text-load``,
``document-load``) asked over the bus, as a test would."""
import uuid

from tests.support.waiting import answered
from trustgraph.base import Requester, Timing
from trustgraph.schema import (
    DocumentLoadRequest,
    LibrarianRequest,
    LibrarianResponse,
    LoadResponse,
    TextLoadRequest,
)


class LibrarianClient:
    def __init__(self, bus, flow, timeout=10.0):
        owner = f"test-{uuid.uuid4().hex[:8]}"
        self.requesters = {name: Requester(bus, name, flow, owner, Timing(timeout=timeout))
                           for name in ("librarian", "text-load", "document-load")}

    async def start(self):
        for requester in self.requesters.values():
            await requester.start()
        return self

    async def load_text(self, **fields):
        return await self.requesters["text-load"].call(TextLoadRequest(**fields), LoadResponse)

    async def load_document(self, **fields):
        return await self.requesters["document-load"].call(DocumentLoadRequest(**fields),
                                                           LoadResponse)

    async def librarian(self, **fields):
        return await self.requesters["librarian"].call(LibrarianRequest(**fields),
                                                       LibrarianResponse)

    async def ready(self, timeout=10.0):
        """Every service answers (each probe is refused as a bad request, or answered)."""
        probes = {"librarian": lambda: self.librarian(operation="list-documents"),
                  "text-load": lambda: self.load_text(id="", text="x"),
                  "document-load": lambda: self.load_document(id="", data="")}
        for name, probe in probes.items():
            await answered(probe, name, timeout=timeout, attempt=1.0)
