"""The embeddings processor: service ``embeddings``, its provider chosen by
``TG_EMBEDDINGS`` (``minilm`` by default, ``openai``, ``ollama``).

``{"texts": [str]}`` answers ``{"vectors": [[float]]}``, one vector per text in
order; a legacy ``{"text": str}`` is one text. An empty list answers an empty
list; more than ``TG_EMBEDDINGS_MAX_TEXTS`` texts is refused (``too-many-texts``)
rather than building a reply larger than the broker carries.
"""
import asyncio
import logging

from trustgraph import tracing
from trustgraph.base import Context, HandledError, Handler, ProcessorSpec, Runtime, Service
from trustgraph.schema import EmbeddingsRequest, EmbeddingsResponse

from .provider import Embedder, EmbeddingsSettings, make

log = logging.getLogger(__name__)


def embeddings_handler(embedder: Embedder, max_texts: int
                       ) -> Handler[EmbeddingsRequest, EmbeddingsResponse]:
    async def embed(request: EmbeddingsRequest, ctx: Context) -> EmbeddingsResponse:
        texts = request.inputs()
        if len(texts) > max_texts:
            raise HandledError("too-many-texts", f"{len(texts)} texts in one request; the "
                               f"limit is {max_texts}: send them in several requests")
        tracing.note(tracing.names.EMBEDDING_MODEL, embedder.name)
        tracing.note(tracing.names.TEXTS, len(texts))
        vectors = await embedder.embed(texts) if texts else []
        return EmbeddingsResponse(vectors=vectors, model=embedder.name, end_of_stream=True)
    return embed


async def services(runtime: Runtime) -> list[Service]:
    settings: EmbeddingsSettings = runtime.settings
    # Loading the local model reads ~90 MB and builds a session: not on the loop.
    embedder = await asyncio.to_thread(make, settings)
    log.info("embeddings provider %s, model %s", settings.tg_embeddings, embedder.name)
    return [Service("embeddings", EmbeddingsRequest, EmbeddingsResponse,
                    embeddings_handler(embedder, settings.tg_embeddings_max_texts),
                    error_type="embeddings-error")]


SPEC = ProcessorSpec("embeddings", EmbeddingsSettings, services)
