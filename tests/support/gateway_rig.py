"""A gateway in front of one real processor per kind of service, for tests that treat
the gateway as a hostile client would (tests/integration/test_gateway_hardening.py,
test_gateway_fuzz.py).

Behind it, on a flow of its own, something answers every row of the gateway's table:
the real text-completion processor (openai provider, talking to the local
OpenAI-format server), the real config, prompt, librarian, triples-store,
vector-store, agent and lazy-rag processors, the real embeddings service (its
handler, with a stand-in embedder and a small ``MAX_TEXTS``), and the scripted
graph-rag / document-rag services. A service added to the gateway gets its processor
here too (one line in ``_processors``), or valid requests to it end as ``no-service``.
``GatewayRig.gateway`` is the ``Gateway`` object, so a test can see what its
dispatcher still holds (``in_flight``).
"""
import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.scripted_rag import ScriptedRag, start_scripted_rag
from tests.support.tenants import Keys, make_keys
from tests.support.waiting import serving
from trustgraph.agent.service import SPEC as AGENT_SPEC
from trustgraph.agent.service import AgentSettings
from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec, Service
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.embeddings.service import embeddings_handler
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.retrieval.lazy_rag.service import SPEC as LAZY_RAG_SPEC
from trustgraph.retrieval.lazy_rag.settings import LazyRagSettings
from trustgraph.schema import (
    KEYS_FLOW,
    LIBRARIAN_FLOW,
    AgentRequest,
    AgentResponse,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    KeysRequest,
    KeysResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    LibrarianRequest,
    LibrarianResponse,
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    TriplesQueryRequest,
    TriplesQueryResponse,
)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

DEADLINE = 30.0
MAX_TEXTS = 4


class StandInEmbedder:
    name = "stand-in"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(text)), 1.0] for text in texts]


EMBEDDINGS_SPEC = ProcessorSpec("test-embeddings", ProcessorSettings, lambda s: [
    Service("embeddings", EmbeddingsRequest, EmbeddingsResponse,
            embeddings_handler(StandInEmbedder(), MAX_TEXTS), error_type="embeddings-error")])


@dataclass
class GatewayRig:
    url: str       # the gateway's base URL, e.g. http://127.0.0.1:PORT/
    flow: str      # the flow every flow service here serves
    gateway: Gateway
    rag: ScriptedRag  # the scripted graph-rag and document-rag: what they were asked
    keys: Keys | None = None  # with ``keys``: the API keys it checks (open without)

    @property
    def socket_url(self) -> str:
        return self.url + "api/v1/socket"

    def in_flight(self) -> int:
        """Requests the gateway's requesters still hold (0 once every answer ended)."""
        return self.gateway.core.client.in_flight()


@asynccontextmanager
async def gateway_rig(broker_url: str, openai_base_url: str, data_dir: Path,
                      keys: bool = False, **gateway_settings) -> AsyncIterator[GatewayRig]:
    """``keys``: users and API keys made before the gateway starts (``tenants.Keys``),
    so it checks them; without, it is open (no key, no token)."""
    flow = f"hard-{uuid.uuid4().hex[:6]}"
    async with AsyncExitStack() as stack:
        for processor in _processors(broker_url, openai_base_url, data_dir, flow):
            await processor.start()
            stack.push_async_callback(processor.stop)
        rag = ScriptedRag()
        stack.push_async_callback((await start_scripted_rag(broker_url, flow, rag)).stop)
        await _all_answering(broker_url, flow)
        made = await make_keys(broker_url) if keys else None
        gateway = Gateway(GatewaySettings(
            pulsar_url=broker_url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
            tg_flows=[flow], tg_request_timeout=15, **gateway_settings))
        stack.push_async_callback(gateway.stop)
        yield GatewayRig(await gateway.start(), flow, gateway, rag, made)


def _processors(url: str, openai_base_url: str, data_dir: Path, flow: str) -> list[Processor]:
    flows = [flow]
    return [
        Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=url,
                                              tg_data_dir=str(data_dir / "config"))),
        Processor(spec_for("openai"), OpenAiSettings(
            pulsar_url=url, openai_base_url=openai_base_url, tg_flows=flows,
            tg_request_timeout=15)),
        Processor(PROMPT_SPEC, PromptSettings(pulsar_url=url, tg_flows=flows,
                                              tg_config_wait=5)),
        Processor(LIBRARIAN_SPEC, LibrarianSettings(
            pulsar_url=url, tg_data_dir=str(data_dir / "library"),
            tg_flows=[LIBRARIAN_FLOW, flow])),
        Processor(EMBEDDINGS_SPEC, ProcessorSettings(pulsar_url=url, tg_flows=flows)),
        # The store owners (and LazyRAG's cache) also on the flow of the services
        # outside flows: collection-management's delete asks them there.
        Processor(service_triples.SPEC, service_triples.TriplesStoreSettings(
            pulsar_url=url, tg_flows=[flow, LIBRARIAN_FLOW],
            tg_data_dir=str(data_dir / "triples"))),
        Processor(service_vectors.SPEC, service_vectors.VectorStoreSettings(
            pulsar_url=url, tg_flows=[flow, LIBRARIAN_FLOW],
            tg_data_dir=str(data_dir / "vectors"))),
        # Two steps at most: the scripted LLM never answers in the agent's format.
        Processor(AGENT_SPEC, AgentSettings(pulsar_url=url, tg_flows=flows,
                                            tg_data_dir=str(data_dir), tg_config_wait=5,
                                            agent_max_iterations=2)),
        Processor(LAZY_RAG_SPEC, LazyRagSettings(
            pulsar_url=url, tg_flows=[flow, LIBRARIAN_FLOW], tg_data_dir=str(data_dir))),
    ]


async def _all_answering(broker_url: str, flow: str) -> None:
    bus = Bus(broker_url)
    try:
        await asyncio.gather(*(
            serving(bus, service, service_flow, probe, model)
            for service, service_flow, probe, model in (
                ("text-completion", flow, TextCompletionRequest(prompt="[tokens=1]"),
                 TextCompletionResponse),
                ("prompt", flow, PromptRequest(id="no-such-template"), PromptResponse),
                ("librarian", LIBRARIAN_FLOW, LibrarianRequest(operation="list-documents"),
                 LibrarianResponse),
                ("keys", KEYS_FLOW, KeysRequest(operation="list-users"), KeysResponse),
                ("embeddings", flow, EmbeddingsRequest(texts=[]), EmbeddingsResponse),
                ("triples", flow, TriplesQueryRequest(), TriplesQueryResponse),
                ("document-embeddings", flow, DocumentEmbeddingsRequest(vector=[1.0]),
                 DocumentEmbeddingsResponse),
                ("lazy-rag-status", flow, LazyRagStatusRequest(), LazyRagStatusResponse),
                ("agent", flow, AgentRequest(question="?"), AgentResponse))))
    finally:
        await bus.close()
