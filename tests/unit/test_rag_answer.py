"""The RAG request handler (trustgraph/retrieval/answer.py, questions.py) driven
through the document-rag service with scripted stand-ins for the services it calls.

The stand-ins are in tests/support/rag_clients.py: the prompt one speaks the
requester's ``frames`` interface, so the real ``PromptClient`` runs between it and the
handler; the embeddings and store ones answer ``call``. The frame sequence, query
optimisation, errors, cancellation and back-pressure shown here are shared by
graph-rag (test_graph_rag.py).
"""
import asyncio

import pytest

from tests.support.rag_clients import ANSWER, QUESTION, QUEUE_DEPTH, Answer, chunk, chunks
from tests.support.rag_clients import DocumentRagRig as Rig
from trustgraph.base import HandledError, ProcessorSettings, Service, ServiceError
from trustgraph.base.service import error_for
from trustgraph.retrieval.document_rag import service as document_rag
from trustgraph.retrieval.questions import MAX_SUBQUERIES
from trustgraph.schema import DocumentRagRequest, Error, RagResponse


async def test_streaming_sends_metadata_then_deltas_then_one_final_without_text():
    rig = Rig()
    records = await rig.records(streaming=True)
    metadata, *deltas, final = records
    assert metadata.message_type == "metadata" and not metadata.end_of_stream
    assert [s.id for s in metadata.sources] == ["c1", "c2"]
    assert (metadata.optimized_query, metadata.subqueries) == (None, [])
    assert all(r.message_type == "chunk" and not r.end_of_stream and r.response is None
               for r in deltas)
    assert "".join(r.chunk for r in deltas) == ANSWER.text
    assert [r.is_final() for r in records].count(True) == 1
    assert (final.message_type, final.chunk, final.response) == ("chunk", "", None)
    assert final.end_of_stream and final.end_of_session and final.error is None
    assert final.sources == metadata.sources
    assert (final.in_token, final.out_token, final.model) == (7, 3, "scripted-model")
    assert rig.answer_prompt().streaming


async def test_not_streaming_is_one_record_with_the_whole_answer():
    rig = Rig()
    [record] = await rig.records()
    assert record.response == ANSWER.text and record.chunk is None
    assert record.message_type is None
    assert record.end_of_stream and record.end_of_session
    assert [s.id for s in record.sources] == ["c1", "c2"]
    assert (record.in_token, record.out_token, record.model) == (7, 3, "scripted-model")
    assert not rig.answer_prompt().streaming


async def test_the_prompt_gets_the_original_question_and_the_chunk_texts_in_source_order():
    rig = Rig(default=chunks(chunk("c2", 0.7), chunk("c1", 0.6)))
    await rig.records()
    assert rig.answer_prompt().variables == {
        "query": QUESTION, "documents": ["text of c2", "text of c1"]}
    [(searched, request)] = rig.store.requests
    assert searched == QUESTION
    assert (request.user, request.collection, request.limit) == ("trustgraph", "default", 20)


async def test_request_scope_and_limit_reach_the_store():
    rig = Rig()
    await rig.records(user="alice", collection="papers", doc_limit=3)
    [(_, request)] = rig.store.requests
    assert (request.user, request.collection, request.limit) == ("alice", "papers", 3)


async def test_optimisation_rewrites_and_decomposes_at_once_and_searches_for_each():
    # Each optimisation prompt answers only once the other was asked: done one after
    # the other, they would wait for ever.
    rewrite_asked, decompose_asked = asyncio.Event(), asyncio.Event()
    rig = Rig(query_rewrite=Answer(deltas=[" founding year of Acme \n"], in_token=5,
                                   out_token=2, on_ask=rewrite_asked,
                                   wait_for=decompose_asked),
              query_decompose=Answer(object=["When was Acme founded?", "Who founded Acme?",
                                             " ", "Who founded Acme?"],
                                     in_token=11, out_token=13, on_ask=decompose_asked,
                                     wait_for=rewrite_asked))
    records = await asyncio.wait_for(rig.records(
        streaming=True, optimize_query=True, subqueries=True), 5)
    metadata, final = records[0], records[-1]
    assert metadata.optimized_query == "founding year of Acme"
    assert metadata.subqueries == ["When was Acme founded?", "Who founded Acme?"]
    searches = ["founding year of Acme", "When was Acme founded?", "Who founded Acme?"]
    assert rig.embeddings.requests == [searches]  # one embeddings request for all
    assert sorted(text for text, _ in rig.store.requests) == sorted(searches)
    assert rig.answer_prompt().variables["query"] == QUESTION  # the question as asked
    assert {r.id: r.variables for r in rig.prompts.asked[:2]} == {
        "query-rewrite": {"query": QUESTION}, "query-decompose": {"query": QUESTION}}
    assert (final.in_token, final.out_token) == (5 + 11 + 7, 2 + 13 + 3)


async def test_only_subqueries_searches_for_the_question_and_each_subquery():
    rig = Rig(query_decompose=Answer(object=[f"part {n}?" for n in range(12)]))
    [record] = await rig.records(subqueries=True)
    assert record.optimized_query is None
    assert record.subqueries == [f"part {n}?" for n in range(MAX_SUBQUERIES)]
    assert rig.embeddings.requests == [[QUESTION, *record.subqueries]]


async def test_an_empty_rewrite_searches_for_the_question():
    rig = Rig(query_rewrite=Answer(deltas=["  "]))
    [record] = await rig.records(optimize_query=True)
    assert record.optimized_query == QUESTION
    assert rig.embeddings.requests == [[QUESTION]]


async def test_a_decomposition_that_is_not_a_list_of_questions_is_a_clear_error():
    rig = Rig(query_decompose=Answer(object={"questions": ["a?"]}))
    with pytest.raises(HandledError) as failure:
        await rig.records(subqueries=True, streaming=True)
    assert failure.value.type == "document-rag-error"
    assert "query-decompose prompt answered {'questions': ['a?']}, not a JSON list" in \
        failure.value.message


async def test_merged_searches_keep_each_chunk_once_with_its_best_score_each_search_first():
    rig = Rig(found={
        "big": chunks(chunk("a1", 0.95), chunk("a2", 0.94), chunk("s", 0.5)),
        "small?": chunks(chunk("s", 0.6), chunk("b1", 0.3), chunk("a1", 0.2)),
    }, query_rewrite=Answer(deltas=["big"]), query_decompose=Answer(object=["small?"]))
    [record] = await rig.records(optimize_query=True, subqueries=True, doc_limit=3)
    assert [(s.id, round(s.distance, 6)) for s in record.sources] == [
        ("a1", 0.05), ("s", 0.4), ("a2", 0.06)]  # b1 is 4th: over the limit
    source = record.sources[0]
    assert (source.document_id, source.title, source.text) == (
        "doc-1", "title of doc-1", "text of a1")


async def test_nothing_found_is_still_answered_from_no_documents():
    rig = Rig(default=chunks())
    metadata, *_, final = await rig.records(streaming=True)
    assert metadata.sources == [] and final.sources == []
    assert rig.answer_prompt().variables["documents"] == []


async def test_an_llm_error_mid_stream_ends_it_with_one_error_after_the_deltas():
    rig = Rig(document_prompt=Answer(deltas=["a", "b", "c", "d"], fail_after=2))
    seen = []
    with pytest.raises(HandledError) as failure:
        async for record in rig.run(streaming=True):
            seen.append(record)
    assert [r.message_type for r in seen][0] == "metadata"
    assert "".join(r.chunk or "" for r in seen) == "ab"
    assert not any(r.is_final() for r in seen)
    error = error_for(rig.service, failure.value)
    assert error == Error(type="document-rag-error",
                          message="answering (document-prompt) failed: llm-error: it broke")
    final = RagResponse.failure(error)  # what the runtime sends as the one last record
    assert final.end_of_stream and final.end_of_session


@pytest.mark.parametrize("failing, error_type, message", [
    ("embeddings", "embeddings-error",
     "embedding the question failed: embeddings-error: no model"),
    ("store", "document-embeddings-error",
     "searching document-embeddings failed: document-embeddings-error: no model"),
])
async def test_a_failed_retrieval_step_is_an_error_before_any_record(failing, error_type,
                                                                       message):
    rig = Rig()

    async def fail(request, model):
        raise ServiceError(Error(type=error_type, message="no model"))
    getattr(rig, failing).call = fail
    with pytest.raises(HandledError) as failure:
        await anext(rig.run(streaming=True))
    assert (failure.value.type, failure.value.message) == ("document-rag-error", message)


@pytest.mark.parametrize("how", ["cancelled", "closed"])
async def test_stopping_the_handler_mid_answer_closes_the_prompt_request(how):
    rig = Rig(document_prompt=Answer(deltas=["a", "b", "c"], hang_after=2))
    run = rig.run(streaming=True)
    assert (await anext(run)).message_type == "metadata"
    assert (await anext(run)).chunk == "ab"
    if how == "cancelled":  # the request's task, as a cancel from the client does
        waiting = asyncio.ensure_future(anext(run))
        await asyncio.sleep(0)
        assert not rig.prompts.closed_early.is_set()  # waiting for more of the answer
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    else:  # the runtime stops reading the handler
        await run.aclose()
    assert rig.prompts.closed_early.is_set()


async def test_a_reply_that_falls_behind_holds_the_prompt_back_then_gets_the_deltas_joined():
    deltas = [f"t{n} " for n in range(QUEUE_DEPTH * 4)]
    rig = Rig(document_prompt=Answer(deltas=deltas))
    run = rig.run(streaming=True)
    await anext(run)  # metadata
    first = (await anext(run)).chunk
    for _ in range(1000):  # the prompt call runs on while this reader does not read
        await asyncio.sleep(0)
    assert rig.prompts.batches_sent <= len(first.split()) + QUEUE_DEPTH + 1
    second = (await anext(run)).chunk
    assert len(second.split()) >= QUEUE_DEPTH  # what waited comes as one record
    rest = [record async for record in run]
    assert first + second + "".join(r.chunk for r in rest) == "".join(deltas)


def test_the_service_is_named_and_typed_for_the_bus():
    [service] = document_rag.SPEC.services(ProcessorSettings())
    assert isinstance(service, Service)
    assert (service.name, service.failure_type) == ("document-rag", "document-rag-error")
    assert service.request is DocumentRagRequest and service.response is RagResponse
    assert set(document_rag.SPEC.uses) == {"prompt", "embeddings", "document-embeddings",
                                           "lexical-search"}
