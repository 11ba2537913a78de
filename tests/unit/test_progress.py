"""Opt-in progress records while a RAG service retrieves (``progress: true`` on a
streaming request): the service sends them before its metadata, the answer-stream
API writes them as ``{"type": "progress"}`` lines, and the client library passes
over them; a request that does not ask sees none."""

from tests.support.answer_lines import lines_of
from tests.support.rag_clients import Answer
from tests.support.rag_clients import DocumentRagRig as Rig
from trustgraph.api import Chunk, Final, Metadata
from trustgraph.api.rag import events_from_frames
from trustgraph.gateway.apis.lines import ProgressLine
from trustgraph.schema import RagResponse


async def test_a_streaming_request_that_asks_gets_progress_before_the_metadata():
    rig = Rig(query_decompose=Answer(object=["one?", "two?"]))
    records = await rig.records(streaming=True, progress=True, subqueries=True)
    progress = [r.progress for r in records if r.message_type == "progress"]
    assert progress == ["splitting the question into sub-questions",
                        "searching the documents for 3 questions"]
    kinds = [r.message_type for r in records]
    assert kinds[:3] == ["progress", "progress", "metadata"]
    assert "progress" not in kinds[3:]


async def test_requests_that_do_not_ask_or_do_not_stream_get_no_progress():
    assert not [r for r in await Rig().records(streaming=True)
                if r.message_type == "progress"]
    [record] = await Rig().records(progress=True)  # not streaming: one record, as ever
    assert record.message_type is None and record.response


async def test_the_query_api_writes_progress_lines_and_then_the_metadata():
    lines, [progress, metadata] = await lines_of(
        RagResponse, ({"message_type": "progress", "progress": "searching"}, False),
        ({"message_type": "metadata", "sources": []}, False))
    assert progress == {"type": "progress", "message": "searching"}
    ProgressLine.model_validate(progress)
    assert metadata["type"] == "metadata"
    assert lines.collected()["response"] == ""


async def test_the_client_library_passes_over_progress_frames():
    async def frames():
        yield {"message_type": "progress", "progress": "searching"}
        yield {"message_type": "metadata", "sources": [{"id": "c1"}]}
        yield {"message_type": "chunk", "chunk": "hi"}
        yield {"message_type": "chunk", "chunk": "", "end_of_stream": True}
    events = [event async for event in events_from_frames(frames())]
    assert isinstance(events[0], Metadata) and events[0].sources == [{"id": "c1"}]
    assert [type(e) for e in events[1:]] == [Chunk, Final]
