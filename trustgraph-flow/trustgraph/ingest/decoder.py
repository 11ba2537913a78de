"""The decoder processor: stage ``decode`` → one ``Chunk`` per chunk on ``chunks``.

For each ``DecodeWork`` it reads the document from the library (the librarian's
store in the shared data dir: metadata and content that belong together), decodes
it by its kind (plain text, Markdown, PDF), splits the text into token-bounded
chunks (its flow's ``chunk-size`` tokens at most, else ``TG_CHUNK_SIZE``;
consecutive chunks sharing up to ``chunk-overlap``, else ``TG_CHUNK_OVERLAP``) and
sends each chunk as its own small record, whatever the size of the document. Each
chunk carries the version of the document it was cut from. Once every chunk is
stored by the broker, the number of chunks is recorded in the library (what
``load-status`` reports), and the work is acknowledged; a crash before that
redelivers it and the same chunks (ids ``<document id>/c<index>``) are sent again,
which every later stage absorbs.

A document that can never become chunks (removed from the library since it was
loaded, an unsupported kind, a PDF with no readable text) is rejected: logged with
the document, tenant and reason, recorded in the library as failed, and
acknowledged.
"""
import asyncio
import logging
import time
from typing import Literal

from pydantic import Field, model_validator

from trustgraph.base import (
    FlowParameters,
    ProcessorSettings,
    ProcessorSpec,
    Rejected,
    Runtime,
    Stage,
    StageContext,
)
from trustgraph.chunking import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_OVERLAP,
    MODEL_LIMIT,
    ModelTokens,
    TokenCounter,
    WordTokens,
    chunk_document,
)
from trustgraph.decoding import DecodeError, decode
from trustgraph.librarian.store import ContentMissing, LibraryStore, NotFound
from trustgraph.schema import Chunk, DecodeWork, DocumentMetadata, DocumentRef
from trustgraph.schema.pipeline import chunk_id

log = logging.getLogger(__name__)

NAME = "decoder"
EMIT_WINDOW = 64  # chunk records in flight to the broker at once


class DecoderSettings(ProcessorSettings):
    tg_chunk_size: int = Field(DEFAULT_MAX_TOKENS, ge=1, description=(
        f"tokens per chunk at most; the default embedding model reads {MODEL_LIMIT}"))
    tg_chunk_overlap: int = Field(DEFAULT_OVERLAP, ge=0, description=(
        "tokens a chunk repeats from the one before it, at most half the chunk size"))
    tg_chunk_tokenizer: Literal["minilm", "words"] = Field("minilm", description=(
        "how tokens are counted: all-MiniLM-L6-v2's tokenizer, or words and punctuation"))

    @model_validator(mode="after")
    def _overlap_fits(self) -> "DecoderSettings":
        if self.tg_chunk_overlap > self.tg_chunk_size // 2:
            raise ValueError(f"TG_CHUNK_OVERLAP ({self.tg_chunk_overlap}) must be at most "
                             f"half of TG_CHUNK_SIZE ({self.tg_chunk_size})")
        return self


def token_counter(name: str) -> TokenCounter:
    if name == "words":
        return WordTokens()
    try:
        from trustgraph.embeddings.minilm.model_files import load_tokenizer
        return ModelTokens(load_tokenizer())  # all-MiniLM-L6-v2's, the default model's
    except Exception as error:  # the model's package is optional
        log.warning("all-MiniLM-L6-v2's tokenizer is not available (%s); counting words "
                    "and punctuation instead", error)
        return WordTokens()


def chunks_ref(document: DocumentMetadata) -> DocumentRef:
    """Whose chunks, and cut from which version of the document."""
    return DocumentRef(id=document.id, user=document.user, collection=document.collection,
                       title=document.title, version=document.version)


def chunk_records(document: DocumentMetadata, content: bytes, kind: str, size: int,
                  overlap: int, counter: TokenCounter, model_window: bool = True
                  ) -> list[Chunk]:
    """The document's chunk records (blocking, CPU-bound); ``DecodeError`` when it
    cannot be read as ``kind``."""
    ref = chunks_ref(document)
    decoded = decode(content, kind)
    # MiniLM-sized chunks leave room for the title and headings they are embedded
    # under; with word counting (another embedding model) the window is unknown.
    window = MODEL_LIMIT if model_window else None
    chunks = chunk_document(decoded, counter, size, overlap, document.title, window)
    return [Chunk(document=ref, id=chunk_id(document.id, c.index), index=c.index,
                  text=c.text, page=c.page, total=len(chunks), page_end=c.page_end,
                  headings=list(c.headings) or None, char_start=c.start, char_end=c.end,
                  author=decoded.author or None)
            for c in chunks]


class ChunkParameters(FlowParameters):
    """A flow's chunking: unset, the decoder's settings."""

    chunk_size: int | None = None
    chunk_overlap: int | None = None


def chunking(flow: ChunkParameters, settings: DecoderSettings) -> tuple[int, int]:
    """The chunk size and overlap on a flow; the overlap at most half the size."""
    size = flow.chunk_size or settings.tg_chunk_size
    overlap = settings.tg_chunk_overlap if flow.chunk_overlap is None else flow.chunk_overlap
    return size, min(overlap, size // 2)


def decoder_stage(settings: DecoderSettings, store: LibraryStore) -> Stage:
    counter = token_counter(settings.tg_chunk_tokenizer)
    model_window = settings.tg_chunk_tokenizer == "minilm"

    async def record(ref: DocumentRef, flow: str, chunks: int | None = None,
                     error: str | None = None) -> None:
        """What became of this version, for ``load-status`` (after the chunks are
        durable: "decoded" must never be reported for chunks a crash could lose)."""
        await asyncio.to_thread(store.record_chunks, ref.user, ref.collection, ref.id,
                                flow, ref.version, chunks, error)

    async def handle(work: DecodeWork, ctx: StageContext) -> None:
        ref, started = work.document, time.perf_counter()
        name = f"document {ref.id!r} of {ref.user}/{ref.collection}"
        try:
            document, content = await asyncio.to_thread(store.read, ref.user,
                                                        ref.collection, ref.id)
        except NotFound:
            raise Rejected(f"{name} is not in the library (removed since it was loaded?)"
                           ) from None
        except ContentMissing as error:
            document = await asyncio.to_thread(store.get, ref.user, ref.collection, ref.id)
            await record(chunks_ref(document), ctx.flow, error=str(error))
            raise Rejected(f"{name}: {error}") from None
        # The kind stored with the content: the document may have been re-loaded as
        # another kind since this work was sent.
        kind = document.kind or work.kind
        size, overlap = chunking(ctx.parameters.of(ChunkParameters), settings)
        try:
            chunks = await asyncio.to_thread(chunk_records, document, content, kind, size,
                                             overlap, counter, model_window)
        except DecodeError as error:
            await record(chunks_ref(document), ctx.flow, error=f"{kind}: {error}")
            raise Rejected(f"{name} ({kind}) cannot be decoded: {error}") from None
        for i in range(0, len(chunks), EMIT_WINDOW):
            await asyncio.gather(*(ctx.emit("chunks", c) for c in chunks[i:i + EMIT_WINDOW]))
        await record(chunks_ref(document), ctx.flow, chunks=len(chunks))
        log.info("%s (%s, %d bytes) -> %d chunks on chunks:%s in %.0f ms", name, kind,
                 len(content), len(chunks), ctx.flow, (time.perf_counter() - started) * 1000)

    return Stage("decode", DecodeWork, handle, subscription=NAME)


async def decoder_parts(runtime: Runtime) -> list[Stage]:
    settings: DecoderSettings = runtime.settings
    store = await asyncio.to_thread(LibraryStore, settings.tg_data_dir)
    return [decoder_stage(settings, store)]


SPEC = ProcessorSpec(NAME, DecoderSettings, decoder_parts)
