"""Scripted stand-ins for what a RAG request handler calls, for unit tests of
document-rag and graph-rag: the prompt service (``ScriptedPrompts``, speaking the
requester's ``frames`` interface so the real ``PromptClient`` runs in between), the
embeddings service and a vector store (answering ``call``), and ``Clients`` to hand
them over as a ``Context``'s clients; ``DocumentRagRig`` (the document-rag service
with them around it) and ``ScriptedSubgraph`` (the triples store's ``subgraph``);
``sent``: a handler's records as they leave the process.
"""
import asyncio
import json
from contextlib import aclosing
from dataclasses import dataclass, field

from trustgraph.base import Context, Items, ProcessorSettings
from trustgraph.base.relay import as_record
from trustgraph.base.requester import Calls
from trustgraph.retrieval.document_rag import service as document_rag
from trustgraph.schema import (
    DocumentEmbeddingsResponse,
    DocumentRagRequest,
    EmbeddingsResponse,
    Error,
    GraphEmbeddingsResponse,
    PromptRequest,
    PromptResponse,
    RagResponse,
    Record,
    ScoredChunk,
    ScoredEntity,
    SubgraphRequest,
    SubgraphResponse,
    Term,
    encode,
)

# Deltas the scripted prompt requester reads ahead of a reader that has stopped, as
# the real requester holds what arrives (bounded) and hands it over as one batch.
QUEUE_DEPTH = 64


@dataclass
class Answer:
    """How the scripted prompt service answers one template."""

    deltas: list[str] = field(default_factory=lambda: ["An ", "answer", "."])
    object: object = None  # a JSON template's answer, instead of text
    fail_after: int | None = None  # an error record after this many deltas
    hang_after: int | None = None  # then nothing more, ever
    on_ask: asyncio.Event | None = None  # set when the template is asked
    wait_for: asyncio.Event | None = None  # answers only once this is set
    in_token: int = 7
    out_token: int = 3
    model: str = "scripted-model"
    read_ahead: int = QUEUE_DEPTH  # as the real requester holds what arrives

    @property
    def text(self) -> str:
        return "".join(self.deltas)


def frame(record: PromptResponse) -> list[tuple[bytes, bool]]:
    return [(encode(record), record.end_of_stream)]


async def sent(model, result):
    """What a handler gave (``result``: its return value or generator), as the
    records that leave the process: sub-streams read in their place, a delta as the
    service's delta record. Closing this closes the handler."""
    async with aclosing(Items(result)) as items:
        async for item in items:
            yield as_record(model, item) if not isinstance(item, Record) else item


class ScriptedPrompts(Calls):
    """The requester of the prompt service: template id → ``Answer``."""

    def __init__(self, **answers: Answer) -> None:
        self.answers = {id.replace("_", "-"): answer for id, answer in answers.items()}
        self.asked: list[PromptRequest] = []
        self.batches_sent = 0
        self.closed_early = asyncio.Event()  # a caller stopped reading before the end

    async def frames(self, request: PromptRequest, request_id: str | None = None):
        self.asked.append(request)
        answer = self.answers[request.id]
        sent_final = False
        try:
            if answer.on_ask is not None:
                answer.on_ask.set()
            if answer.wait_for is not None:
                await answer.wait_for.wait()
            batches = self._batches(request, answer)
            if answer.read_ahead:
                batches = self._read_ahead(batches, answer.read_ahead)
            async for batch in _async(batches):
                yield batch
                sent_final = batch[-1][1]
            if not sent_final:
                await asyncio.Event().wait()  # hung: nothing more, ever
        finally:
            if not sent_final:
                self.closed_early.set()

    async def _read_ahead(self, batches, depth: int):
        """Frames read on by a task of their own, up to ``depth`` waiting; whatever
        waits is handed over as one batch."""
        waiting: list = []
        ready = asyncio.Event()

        async def read() -> None:
            for batch in batches:
                while len(waiting) >= depth:
                    await asyncio.sleep(0)
                waiting.extend(batch)
                ready.set()
        task = asyncio.create_task(read())
        try:
            while True:
                await ready.wait()
                ready.clear()
                batch, waiting[:] = list(waiting), []
                if batch:
                    yield batch
                    if batch[-1][1]:
                        return
        finally:
            task.cancel()

    def _batches(self, request: PromptRequest, answer: Answer):
        for batch in self._scripted(request, answer):
            self.batches_sent += 1
            yield batch

    @staticmethod
    def _scripted(request: PromptRequest, answer: Answer):
        tokens = dict(in_token=answer.in_token, out_token=answer.out_token, model=answer.model)
        if answer.object is not None:
            yield frame(PromptResponse(object=json.dumps(answer.object), end_of_stream=True,
                                       **tokens))
            return
        if not request.streaming:
            yield frame(PromptResponse(text=answer.text, end_of_stream=True, **tokens))
            return
        for n, delta in enumerate(answer.deltas):
            if n == answer.fail_after:
                yield frame(PromptResponse(error=Error(type="llm-error", message="it broke"),
                                           end_of_stream=True))
                return
            if n == answer.hang_after:
                return
            yield frame(PromptResponse(text=delta))
        yield frame(PromptResponse(text="", end_of_stream=True, **tokens))


async def _async(batches):
    if hasattr(batches, "__aiter__"):
        async for batch in batches:
            yield batch
    else:
        for batch in batches:
            yield batch


class ScriptedEmbeddings:
    """Gives each distinct text a vector of its own, so the store knows which it got."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.requests: list[list[str]] = []

    async def call(self, request, model):
        self.requests.append(request.texts)
        for text in request.texts:
            if text not in self.texts:
                self.texts.append(text)
        return EmbeddingsResponse(vectors=[[float(self.texts.index(t))] for t in request.texts],
                                  end_of_stream=True)

    def text_of(self, vector: list[float]) -> str:
        return self.texts[int(vector[0])]


class ScriptedStore:
    """A vector store: search text → its answer (a record or an exception)."""

    def __init__(self, embeddings: ScriptedEmbeddings, answers: dict[str, Record | Exception],
                 default: Record | None = None) -> None:
        self.embeddings = embeddings
        self.answers = answers
        self.default = default
        self.requests: list[tuple[str, Record]] = []

    async def call(self, request, model):
        text = self.embeddings.text_of(request.vector)
        self.requests.append((text, request))
        answer = self.answers.get(text, self.default)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clients:
    def __init__(self, **requesters) -> None:
        self.requesters = {name.replace("_", "-"): r for name, r in requesters.items()}

    async def get(self, service: str):
        return self.requesters[service]


# -- document-rag with the scripted services around it --------------------------------

def chunk(id: str, score: float, document: str = "doc-1") -> ScoredChunk:
    return ScoredChunk(chunk_id=id, text=f"text of {id}", score=score, document_id=document,
                       title=f"title of {document}")


def chunks(*found: ScoredChunk) -> DocumentEmbeddingsResponse:
    return DocumentEmbeddingsResponse(chunks=list(found))


QUESTION = "What does the corpus say?"
ANSWER = Answer(deltas=["Acme ", "was ", "founded ", "in ", "1999", "."])


class DocumentRagRig:
    """The document-rag service with scripted services around it."""

    def __init__(self, found: dict[str, Record | Exception] | None = None,
                 default: Record | None = None, **prompts: Answer) -> None:
        self.prompts = ScriptedPrompts(**{"document_prompt": ANSWER, **prompts})
        self.embeddings = ScriptedEmbeddings()
        self.store = ScriptedStore(self.embeddings, found or {},
                                   default or chunks(chunk("c1", 0.9), chunk("c2", 0.8)))
        self.clients = Clients(prompt=self.prompts, embeddings=self.embeddings,
                               document_embeddings=self.store)
        [self.service] = document_rag.SPEC.services(ProcessorSettings())

    def run(self, **request):
        request = DocumentRagRequest(**{"query": QUESTION, **request})
        return sent(RagResponse, self.service.handler(request, Context(
            id="t", flow="default", clients=self.clients)))

    async def records(self, **request) -> list[RagResponse]:
        return [record async for record in self.run(**request)]

    def answer_prompt(self) -> PromptRequest:
        [asked] = [r for r in self.prompts.asked if r.id == "document-prompt"]
        return asked


# -- graph-rag's entity search and subgraph -----------------------------------------

def entities(*found: tuple[Term, float, str]) -> GraphEmbeddingsResponse:
    return GraphEmbeddingsResponse(entities=[ScoredEntity(entity=e, score=score, label=label)
                                             for e, score, label in found])


class ScriptedSubgraph:
    def __init__(self, answer: SubgraphResponse | Exception) -> None:
        self.answer = answer
        self.requests: list[SubgraphRequest] = []

    async def call(self, request, model):
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer
