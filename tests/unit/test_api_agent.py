"""The agent in the client library over scripted frames: the typed events, the
collected answer with its steps, errors."""
import pytest

from trustgraph.api import (
    AgentAction,
    AgentAnswer,
    AgentFinal,
    AgentObservation,
    AgentResult,
    AgentStream,
    AgentThought,
    TrustGraphError,
    Usage,
)
from trustgraph.api.agent import events_from_frames

SOURCES = [{"id": "c1", "document_id": "d1", "title": "T", "text": "x", "distance": 0.1}]


def frame(kind: str, content: str = "", end: bool = False, final: bool = False,
          **fields) -> dict:
    return {"chunk_type": kind, "message_type": kind, "content": content,
            "end_of_message": end or final, "end_of_dialog": final, **fields}


DIALOG = (
    frame("thought", "I need ", sources=SOURCES), frame("thought", "to look", end=True),
    frame("action", "search", end=True, tool="search", arguments={"q": "x"}),
    frame("observation", "found it", end=True),
    frame("answer", "The "), frame("answer", "answer", final=True, in_token=7, out_token=2,
                                   model="m", session_id="s1"))


def stream_of(*frames: dict) -> AgentStream:
    async def responses():
        for item in frames:
            yield item
    return AgentStream(lambda: events_from_frames(responses()))


async def test_frames_become_typed_events_in_order():
    stream = stream_of(*DIALOG)
    events = [event async for event in stream]
    assert events == [
        AgentThought("I need "), AgentThought("to look", True),
        AgentAction("search", {"q": "x"}, "search"), AgentObservation("found it", True),
        AgentAnswer("The "), AgentAnswer("answer", True),
        AgentFinal(Usage(7, 2, "m"), "s1", SOURCES)]
    assert (stream.usage, stream.session_id) == (Usage(7, 2, "m"), "s1")


async def test_collected_answer_has_whole_steps_session_and_usage():
    result = await stream_of(*DIALOG).collect()
    assert isinstance(result, AgentResult) and isinstance(result, str)
    assert result == "The answer"
    assert result.steps == [AgentThought("I need to look", True),
                            AgentAction("search", {"q": "x"}, "search"),
                            AgentObservation("found it", True)]
    assert (result.session_id, result.usage, result.sources) == ("s1", Usage(7, 2, "m"), SOURCES)


async def test_a_one_frame_dialog_collects_to_its_answer():
    result = await stream_of(frame("answer", "whole", final=True, session_id="s2")).collect()
    assert result == "whole" and result.steps == [] and result.session_id == "s2"


async def test_an_error_frame_raises():
    stream = stream_of(frame("thought", "t"), frame("error", "no such tool", final=True))
    with pytest.raises(TrustGraphError) as failure:
        [event async for event in stream]
    assert (failure.value.type, failure.value.message) == ("agent-error", "no such tool")


async def test_a_stream_is_iterated_once():
    stream = stream_of(*DIALOG)
    [event async for event in stream]
    with pytest.raises(RuntimeError):
        [event async for event in stream]
