"""Reranking through the LLM (trustgraph/retrieval/rerank.py), driven through the
document-rag service with the scripted prompt service and stores of
tests/support/rag_clients.py: the order it gives, what it costs, and that a reranker
that fails, hangs or answers nonsense leaves the fused order and the answer."""
import asyncio

import pytest

from tests.support.rag_clients import QUESTION, Answer, chunk, chunks
from tests.support.rag_clients import DocumentRagRig as Rig
from trustgraph.retrieval.answer import rag_service
from trustgraph.retrieval.document_rag import service as document_rag
from trustgraph.retrieval.rerank import Reranking, ranked
from trustgraph.retrieval.search import Fusion
from trustgraph.schema import DocumentRagRequest

FOUR = chunks(*(chunk(f"c{n}", 1 - n / 10) for n in range(1, 5)))


def order(record) -> list[str]:
    return [s.id for s in record.sources]


async def test_the_reranker_orders_the_chunks_and_its_tokens_are_counted():
    rig = Rig(default=FOUR, rerank=Answer(object=[3, 1], in_token=40, out_token=5))
    [record] = await rig.records(rerank=True)
    # The passages it named lead, in its order; the others follow in fused order.
    assert order(record) == ["c3", "c1", "c2", "c4"]
    assert [s.scores["rerank"] for s in record.sources] == [1, 2, 3, 4]
    assert record.sources[0].scores["vector"] == pytest.approx(0.7)
    [asked] = [r for r in rig.prompts.asked if r.id == "rerank"]
    assert asked.variables == {"query": QUESTION, "passages": [
        {"n": n, "title": "title of doc-1", "text": f"text of c{n}"} for n in range(1, 5)]}
    assert rig.answer_prompt().variables["documents"][0] == "text of c3"
    assert (record.in_token, record.out_token) == (40 + 7, 5 + 3)


async def test_reranking_retrieves_its_candidates_and_keeps_the_requests_limit():
    rig = Rig(default=FOUR, rerank=Answer(object=[4, 2]))
    [record] = await rig.records(rerank=True, doc_limit=2)
    [(_, searched)] = rig.store.requests
    assert searched.limit == Reranking().candidates
    assert order(record) == ["c4", "c2"]


async def test_without_rerank_no_reranking_prompt_is_asked():
    rig = Rig(default=FOUR, rerank=Answer(object=[4]))
    [record] = await rig.records(doc_limit=2)
    assert order(record) == ["c1", "c2"]
    assert "rerank" not in {r.id for r in rig.prompts.asked}
    assert "rerank" not in record.sources[0].scores


@pytest.mark.parametrize("answer", [Answer(object={"best": 3}), Answer(object=[9, 0]),
                                    Answer(object=[]), Answer(fail_after=0)],
                         ids=["not a list", "no passage it has", "empty", "prompt fails"])
async def test_a_reranker_that_cannot_rank_leaves_the_fused_order_and_the_answer(answer):
    rig = Rig(default=FOUR, rerank=answer)
    records = await rig.records(rerank=True, streaming=True)
    assert order(records[0]) == ["c1", "c2", "c3", "c4"]
    assert records[-1].end_of_session and records[-1].error is None
    assert "rerank" not in records[0].sources[0].scores


async def test_a_reranker_that_hangs_is_given_up_at_its_timeout():
    rig = Rig(default=FOUR, rerank=Answer(object=[2], wait_for=asyncio.Event()))  # never
    rig.service = rag_service(document_rag.NAME, document_rag.ERROR, DocumentRagRequest,
                              document_rag.chunk_retriever(Fusion(mode="vector"),
                                                           Reranking(timeout=0.2)))
    [record] = await rig.records(rerank=True)
    assert order(record) == ["c1", "c2", "c3", "c4"]
    assert record.response


def test_ranked_names_each_passage_once_then_the_rest_in_order():
    assert ranked([2, 2, 5, 1, True, "3", 0], 4) == [1, 0, 2, 3]
    assert ranked([4, 3, 2, 1], 4) == [3, 2, 1, 0]
    assert ranked([7], 4) is None and ranked("2", 4) is None
