"""``LibrarianClient``: the librarian's three services (``librarian``, ``text-load``,
``document-load``) asked over the bus, as a test would."""
import asyncio
import uuid

from trustgraph.base import Requester, ServiceError
from trustgraph.schema import (DocumentLoadRequest, LibrarianRequest, LibrarianResponse,
                               LoadResponse, TextLoadRequest)


class LibrarianClient:
    def __init__(self, bus, flow, timeout=10.0):
        owner = f"test-{uuid.uuid4().hex[:8]}"
        self.requesters = {name: Requester(bus, name, flow, owner, timeout)
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
        """Every service answers. The broker drops a request that arrives in the moment
        between a consumer subscribing and its permits reaching the broker, so each
        first request is retried."""
        probes = {"librarian": lambda: self.librarian(operation="list-documents"),
                  "text-load": lambda: self.load_text(id="", text="x"),
                  "document-load": lambda: self.load_document(id="", data="")}
        async with asyncio.timeout(timeout):
            for probe in probes.values():
                while True:
                    try:
                        async with asyncio.timeout(1.0):
                            await probe()
                    except ServiceError as error:
                        if error.error.type == "bad-request":
                            break
                    except TimeoutError:
                        continue
                    else:
                        break
