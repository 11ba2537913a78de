"""A document load whose answer is dropped on its way to the requester is asked
after and answered again, never failed and never stored twice (issue 32).

Answers travel on non-persistent topics, and the broker drops a message for a
consumer whose connection is backed up: during bench.mixed's load the librarian's
final record of a text-load (broker receipt in hand) never reached the gateway, which
then failed the load with "went quiet" (accepted, then nothing) or "no-service" (its
marker dropped too, and every re-send ignored as answered), though the document was
stored.

Here a real librarian serves a real ``Requester`` over a real broker, through a
relay that drops the load's final record (and, in the second case, everything
before it) as the broker did. Nothing waits on the clock: the relay says when it
has dropped, and the librarian's store is held only until its marker has passed.
"""
import asyncio
import sqlite3
import uuid

import pytest

from trustgraph.base import Processor, Requester, Timing
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.librarian.store import LibraryStore
from trustgraph.pubsub import Bus
from trustgraph.schema import LoadResponse, TextLoadRequest, request_topic

pytestmark = pytest.mark.timeout(60)

# keep-alives every 0.4 s: the requester asks after a quiet request after 0.6 s and
# takes 2 s of silence as its answer lost (the product's: 3 s and 10 s)
TIMING = Timing(timeout=30, keep_alive=0.4)


class Relay:
    """Carries text-load requests from flow ``front`` to the librarian on ``back``
    and its answers back, dropping for each request id its first final record
    (``before_too``: and everything before it)."""

    def __init__(self, bus: Bus, front: str, back: str, before_too: bool) -> None:
        self.bus, self.front, self.back, self.before_too = bus, front, back, before_too
        self.answers = f"non-persistent://tg/response/relay-{uuid.uuid4().hex}"
        self.reply_to: dict[str, str] = {}  # request id → the requester's topic
        self.dropped: dict[str, list[dict[str, str]]] = {}  # request id → what it dropped
        self.passed: dict[str, list[dict[str, str]]] = {}
        self.changed = asyncio.Event()
        self._producers: dict[str, object] = {}

    async def start(self) -> "Relay":
        await self.bus.consume(request_topic("text-load", self.front), "relay", self._request)
        await self.bus.consume(self.answers, "relay", self._answer)
        return self

    async def _producer(self, topic: str):
        if topic not in self._producers:
            self._producers[topic] = await self.bus.producer(topic)
        return self._producers[topic]

    async def _request(self, message) -> None:
        properties = dict(message.properties())
        self.reply_to[properties["id"]] = properties["reply-to"]
        properties["reply-to"] = self.answers
        sending = await self._producer(request_topic("text-load", self.back))
        await sending.send(message.data(), properties)

    async def _answer(self, message) -> None:
        properties = dict(message.properties())
        request_id = properties["id"]
        dropped = self.dropped.setdefault(request_id, [])
        final_dropped = any(p.get("end") for p in dropped)
        if not final_dropped and (properties.get("end") or self.before_too):
            dropped.append(properties)
        else:
            self.passed.setdefault(request_id, []).append(properties)
            sending = await self._producer(self.reply_to[request_id])
            await sending.send(message.data(), properties)
        self.changed.set()

    async def until(self, check) -> None:
        async with asyncio.timeout(30):
            while not check():
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
async def librarian(broker, tmp_path):
    back = f"lost-{uuid.uuid4().hex[:8]}"
    processor = Processor(LIBRARIAN_SPEC, LibrarianSettings(
        pulsar_url=broker.url, tg_data_dir=str(tmp_path), tg_flows=[back]), timing=TIMING)
    await processor.start()
    yield back
    await processor.stop()


async def asking(bus: Bus, flow: str) -> Requester:
    requester = Requester(bus, "text-load", flow, f"t-{uuid.uuid4().hex[:6]}", TIMING)
    await requester.start()
    return requester


async def test_an_accepted_load_whose_answer_is_dropped_is_answered_again(
        bus, librarian, tmp_path):
    """The librarian says ``accepted`` (its store is busy), then its final record is
    dropped: the requester, hearing nothing more, asks after it and gets it."""
    relay = await Relay(bus, f"front-{uuid.uuid4().hex[:6]}", librarian,
                        before_too=False).start()
    requester = await asking(bus, relay.front)
    busy = sqlite3.connect(LibraryStore(tmp_path).path, isolation_level=None)
    busy.execute("BEGIN IMMEDIATE")  # the library's write lock: its store waits
    loading = asyncio.create_task(requester.call(
        TextLoadRequest(id="doc", user="u", collection="c", text="Words."), LoadResponse))
    await relay.until(lambda: any(p.get("accepted") for p in _all(relay.passed)))
    busy.execute("COMMIT")
    busy.close()
    answer = await loading
    assert answer.error is None
    [request_id] = relay.dropped
    assert [p.get("end") for p in relay.dropped[request_id]] == ["1"]
    assert relay.passed[request_id][-1].get("end") == "1"
    assert _stored_once(tmp_path)


async def test_a_load_whose_marker_and_answer_are_dropped_is_answered_again(
        bus, librarian, tmp_path):
    """Nothing of the answer reaches the requester (a quick load sends no marker):
    its re-sends of the request, once answered, get the answer again, and the
    document is stored once."""
    relay = await Relay(bus, f"front-{uuid.uuid4().hex[:6]}", librarian,
                        before_too=True).start()
    requester = await asking(bus, relay.front)
    answer = await requester.call(
        TextLoadRequest(id="doc", user="u", collection="c", text="Words."), LoadResponse)
    assert answer.error is None
    [request_id] = relay.dropped
    assert relay.dropped[request_id][-1].get("end") == "1"
    assert _stored_once(tmp_path)


def _all(by_id: dict[str, list[dict[str, str]]]) -> list[dict[str, str]]:
    return [properties for seen in by_id.values() for properties in seen]


def _stored_once(data_dir) -> bool:
    document, content = LibraryStore(data_dir).read("u", "c", "doc")
    return content == b"Words." and document.version == 1  # each store adds a version
