"""The ``subgraph`` service of ``triples-store`` on a real pulsar-lite broker with the
real SQLite store: expansion limits, labels, provenance, tenancy, one message, and
the store round trips one request costs (the processor's store is wrapped to count
them). The backends' own behaviour is the contract suite's (test_triples_contract)."""
import asyncio
import json
import uuid
from collections import Counter

import aiohttp
import pytest

from trustgraph.base import Processor, ProcessorSpec, Requester, ServiceError, Stage, Timing
from trustgraph.base.stage import Emitters
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.pubsub.embedded import free_port
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    RDFS_LABEL,
    ChunkTriples,
    DocumentRef,
    SubgraphRequest,
    SubgraphResponse,
    Term,
    Triple,
    encode,
)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.triples.sqlite import SqliteTriplesStore

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
ROUND_TRIPS = ("query", "neighbours", "labels", "provenance", "count")


def t(s: str, p: str, o: str | Term) -> Triple:
    return Triple(s=I(f"http://ex/{s}"), p=I(f"http://ex/{p}"),
                  o=o if isinstance(o, Term) else I(f"http://ex/{o}"))


def label(entity: str, text: str) -> Triple:
    return Triple(s=I(f"http://ex/{entity}"), p=I(RDFS_LABEL), o=L(text))


class Counting:
    """The processor's store, counting the round trips each read makes."""

    def __init__(self, store):
        self.store, self.calls = store, Counter()

    def __getattr__(self, name):
        attribute = getattr(self.store, name)
        if name not in ROUND_TRIPS:
            return attribute

        async def counted(*args, **kwargs):
            self.calls[name] += 1
            return await attribute(*args, **kwargs)
        return counted


class TriplesStore:
    """``triples-store`` serving one flow, its store in the test's hands too."""

    def __init__(self, broker, store):
        self.broker, self.store, self.counting = broker, store, Counting(store)
        self.flow = f"subgraph-{uuid.uuid4().hex[:8]}"
        self.stored = asyncio.Queue()  # a stage name per stage record handled (committed)

    async def start(self, data_dir):
        settings = service_triples.TriplesStoreSettings(
            pulsar_url=self.broker.url, tg_flows=[self.flow], tg_data_dir=str(data_dir))
        made = [self._signalling(part) if isinstance(part, Stage) else part
                for part in service_triples.parts(self.counting)]
        spec = ProcessorSpec(service_triples.NAME, type(settings), lambda _: made)
        self.processor = Processor(spec, settings)
        await self.processor.start()
        self.requester = Requester(self.processor.bus, "subgraph", self.flow,
                                   f"test-{uuid.uuid4().hex[:8]}", timing=Timing(timeout=20))
        await self.requester.start()
        self.emit = Emitters(self.processor.bus, self.flow).emit
        return self

    def _signalling(self, stage: Stage) -> Stage:
        async def handler(record, ctx):
            await stage.handler(record, ctx)
            self.stored.put_nowait(stage.name)
        return Stage(stage.name, stage.record, handler, stage.subscription)

    async def subgraph(self, seeds, **request) -> SubgraphResponse:
        self.counting.calls.clear()
        response = await self.requester.call(
            SubgraphRequest(seeds=[I(f"http://ex/{s}") for s in seeds], **request),
            SubgraphResponse)
        assert response.end_of_stream and response.error is None
        return response


@pytest.fixture
async def service(broker, tmp_path):
    store = await SqliteTriplesStore.open(tmp_path / "triples.sqlite")
    service = await TriplesStore(broker, store).start(tmp_path)
    yield service
    await service.processor.stop()  # closes the store


def found(response: SubgraphResponse) -> dict[Triple, tuple[str, str]]:
    return {e.triple: (e.document_id, e.chunk_id) for e in response.triples}


PEOPLE = [t("alice", "knows", "bob"), t("bob", "knows", "carol"), t("carol", "age", L("42")),
          label("alice", "Alice"), label("bob", "Bob"), label("knows", "knows of")]


async def test_one_request_brings_triples_labels_and_provenance(service):
    await service.store.add("u", "c", PEOPLE[:2], document="doc1", chunk="doc1/c0")
    await service.store.add("u", "c", PEOPLE[2:], document="doc2", chunk="doc2/c3")
    response = await service.subgraph(["alice"], user="u", collection="c")
    # label triples are not statements of the subgraph: they come back as ``labels``
    assert found(response) == {PEOPLE[0]: ("doc1", "doc1/c0"), PEOPLE[1]: ("doc1", "doc1/c0")}
    # every IRI of the subgraph that has a label: seeds, ends and predicates alike
    assert response.labels == {"http://ex/alice": "Alice", "http://ex/bob": "Bob",
                               "http://ex/knows": "knows of"}
    wire = json.loads(encode(response))
    assert wire["triples"][0] == {"triple": {"s": {"t": "i", "i": "http://ex/alice"},
                                             "p": {"t": "i", "i": "http://ex/knows"},
                                             "o": {"t": "i", "i": "http://ex/bob"}},
                                  "document_id": "doc1", "chunk_id": "doc1/c0"}


async def test_provenance_comes_from_the_ingested_chunk(service):
    document = DocumentRef(id="paper", user="u", collection="c", title="Paper")
    await service.emit("triples", ChunkTriples(document=document, chunk_id="paper/c7",
                                               triples=PEOPLE[:2]))
    await service.stored.get()  # handled by the stage, i.e. committed
    response = await service.subgraph(["bob"], user="u", collection="c", max_path_length=1)
    assert found(response) == {PEOPLE[0]: ("paper", "paper/c7"),
                               PEOPLE[1]: ("paper", "paper/c7")}


CHAIN = [t(f"n{i}", "next", f"n{i + 1}") for i in range(6)]


@pytest.mark.parametrize("hops", [1, 2, 3, 5])
async def test_expansion_stops_at_max_path_length(service, hops):
    await service.store.add("u", "c", CHAIN, document="d")
    response = await service.subgraph(["n0"], user="u", collection="c", max_path_length=hops)
    assert [e.triple for e in response.triples] == CHAIN[:hops]  # in the order reached
    assert service.counting.calls["neighbours"] == hops


async def test_round_trips_follow_the_hops_not_the_entities(service):
    """Two hops over 1 + 30 + 30 entities: still one neighbours call per hop, then one
    for all labels, one for all provenance, and one for the labels (titles, heading
    paths) of the documents and chunks the triples are cited from."""
    star = [t("hub", "to", f"m{i}") for i in range(30)]
    star += [t(f"m{i}", "to", f"e{i}") for i in range(30)]
    star += [label(f"e{i}", f"end {i}") for i in range(30)]
    await service.store.add("u", "c", star, document="d", chunk="d/c0")
    response = await service.subgraph(["hub"], user="u", collection="c", max_path_length=2,
                                      max_entities=100, max_subgraph_size=1000)
    assert len(response.triples) == 60 and len(response.labels) == 30
    assert all(e.document_id == "d" for e in response.triples)
    assert service.counting.calls == {"neighbours": 2, "labels": 2, "provenance": 1}
    three = await service.subgraph(["hub"], user="u", collection="c", max_path_length=3,
                                   max_entities=100, max_subgraph_size=1000)
    # the third hop reaches only the ends' label triples: they come back as labels
    assert len(three.triples) == 60 and len(three.labels) == 30
    assert service.counting.calls == {"neighbours": 3, "labels": 2, "provenance": 1}


async def test_entity_triple_and_size_limits_hold(service):
    hub = [t("hub", "has", f"spoke{i}") for i in range(12)]
    spokes = [t(f"spoke{i}", "has", f"leaf{i}") for i in range(12)]
    await service.store.add("u", "c", hub + spokes, document="d")
    per_entity = await service.subgraph(["hub"], user="u", collection="c", triple_limit=5,
                                        max_path_length=1)
    assert len(per_entity.triples) == 5
    few_entities = await service.subgraph(["hub"], user="u", collection="c", max_entities=4)
    # hub and 3 spokes are followed: all 12 hub triples, then the 3 spokes' leaves
    assert {e.triple for e in few_entities.triples} == set(hub) | set(spokes[:3])
    small = await service.subgraph(["hub"], user="u", collection="c", max_subgraph_size=7)
    assert [e.triple for e in small.triples] == hub[:7]


async def test_no_user_or_collection_sees_another_ones_subgraph(service):
    scopes = [("alice", "work"), ("alice", "home"), ("bob", "work")]
    for n, (user, collection) in enumerate(scopes):
        await service.store.add(user, collection, [
            t("a", "knows", "b"), t("b", "knows", f"only{n}"), label("a", f"A{n}"),
            label(f"only{n}", f"only {n}")], document=f"doc{n}", chunk=f"doc{n}/c0")
    for n, (user, collection) in enumerate(scopes):
        response = await service.subgraph(["a"], user=user, collection=collection,
                                          max_path_length=3)
        mine = {t("a", "knows", "b"), t("b", "knows", f"only{n}")}
        assert found(response) == {x: (f"doc{n}", f"doc{n}/c0") for x in mine}
        assert response.labels == {"http://ex/a": f"A{n}", f"http://ex/only{n}": f"only {n}"}
        other = (n + 1) % 3
        stranger = await service.subgraph([f"only{other}"], user=user, collection=collection)
        assert stranger.triples == [] and stranger.labels == {}
    empty = await service.subgraph(["a"], user="carol", collection="work")
    assert empty.triples == [] and empty.labels == {}


async def test_a_subgraph_too_big_for_one_message_keeps_the_nearest_triples(service):
    """10 near triples, then 150 of 40 KB each (6 MB): what fits, nearest first."""
    near = [t("seed", "to", f"m{i}") for i in range(10)]
    far = [t(f"m{i}", "says", L(f"{i}.{j} " + "x" * 40_000)) for i in range(10)
           for j in range(15)]
    await service.store.add("u", "c", near + far + [label("m0", "M0")], document="d")
    response = await service.subgraph(["seed"], user="u", collection="c",
                                      max_subgraph_size=1000)
    kept = [e.triple for e in response.triples]
    assert kept[:10] == near and 10 < len(kept) < 161
    assert set(kept[10:]) <= set(far) | {label("m0", "M0")}
    assert len(encode(response)) <= MAX_RECORD_BYTES
    # only the labels of IRIs still in the answer
    assert set(response.labels) <= {x.i for e in response.triples
                                    for x in (e.triple.s, e.triple.p, e.triple.o) if x.is_iri}


@pytest.mark.parametrize("bad, field", [
    ({"seeds": [L("alice")]}, "seeds"), ({"seeds": []}, "seeds"), ({"seeds": None}, "seeds"),
    ({"max_path_length": 0}, "max_path_length"), ({"max_path_length": 6}, "max_path_length"),
    ({"max_subgraph_size": 0}, "max_subgraph_size"), ({"triple_limit": -1}, "triple_limit"),
    ({"user": ""}, "user"), ({"seeds": "alice"}, "seeds")])
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
async def test_bad_requests_get_a_clear_error(service, bad, field):
    request = {"seeds": [I("http://ex/alice")], **bad}  # None: left out on the wire
    with pytest.raises(ServiceError) as failure:
        await service.requester.call(SubgraphRequest.model_construct(**request),
                                     SubgraphResponse)
    assert failure.value.error.type == "bad-request"
    assert field in failure.value.error.message
    assert service.counting.calls == {}  # refused before touching the store
    await service.store.add("u", "c", PEOPLE[:1], document="d")
    assert len((await service.subgraph(["alice"], user="u", collection="c")).triples) == 1


async def test_a_failing_store_is_a_subgraph_error(service):
    await service.store.close()  # its threads gone: every read now fails
    with pytest.raises(ServiceError) as failure:
        await service.subgraph(["alice"])
    assert failure.value.error.type == "subgraph-error"


async def test_the_gateway_serves_it_over_rest(service):
    await service.store.add("trustgraph", "default", PEOPLE, document="d", chunk="d/c1")
    gateway = Gateway(GatewaySettings(
        pulsar_url=service.broker.url, tg_gateway_host="127.0.0.1",
        tg_gateway_port=free_port(), tg_flows=[service.flow], tg_request_timeout=15,
        tg_gateway_keys=False))
    url = (await gateway.start()).rstrip("/")
    try:
        async with aiohttp.ClientSession() as http:
            path = f"{url}/api/v1/flow/{service.flow}/service/subgraph"
            async with http.post(path, json={"seeds": [{"t": "i", "i": "http://ex/carol"}],
                                             "max-path-length": 1}) as answer:
                assert answer.status == 200
                body = await answer.json()
            async with http.post(path, json={"seeds": [{"t": "l", "v": "x"}]}) as refused:
                assert refused.status == 400 and "seeds" in await refused.text()
    finally:
        await gateway.stop()
    assert body["triples"] == [
        {"triple": json.loads(encode(PEOPLE[1])), "document_id": "d", "chunk_id": "d/c1"},
        {"triple": json.loads(encode(PEOPLE[2])), "document_id": "d", "chunk_id": "d/c1"}]
    assert body["labels"] == {"http://ex/bob": "Bob", "http://ex/knows": "knows of"}


def test_requests_decode_from_the_gateway_spellings():
    """What a gateway client sends (hyphenated or not) and the defaults of the protocol."""
    request = SubgraphRequest.model_validate_json(json.dumps({
        "seeds": [{"t": "i", "i": "http://ex/a"}], "max-path-length": 3,
        "max_entities": 7, "max-subgraph-size": 9, "triple-limit": 4, "user": "u"}))
    assert (request.max_path_length, request.max_entities, request.max_subgraph_size,
            request.triple_limit, request.user, request.collection) == (3, 7, 9, 4, "u",
                                                                       "default")
    defaults = SubgraphRequest(seeds=[I("http://ex/a")])
    assert (defaults.max_path_length, defaults.max_entities, defaults.max_subgraph_size,
            defaults.triple_limit) == (2, 50, 150, 30)
