"""The one reader of an answer's records (``trustgraph.answers.Reader``): each
answering service's records as the events every API renders, by what its response
model declares; and a service the APIs have never heard of, rendered by them all
from its declarations alone."""
import json

import pytest

from tests.support.answer_lines import lines_of
from trustgraph.answers import Done, Failed, Opened, Progress, Reader, Sources, Step, Text
from trustgraph.gateway.apis.lines import CONTENT, STEPS, ContentLine, StepLine, done_model
from trustgraph.gateway.apis.openai_answers import Completion, Events
from trustgraph.schema import (
    AgentResponse,
    Error,
    LazyRagResponse,
    PromptResponse,
    RagResponse,
    Response,
    TextCompletionResponse,
    Usage,
)

SOURCES = [{"id": "c1", "document_id": "d1", "text": "x", "distance": 0.1}]


def read(model: type[Response], *records: dict, text_only: bool = False) -> list:
    reader = Reader(model, text_only)
    return [event for record in records for event in reader.read(record)]


def test_a_rag_stream_opens_with_its_metadata_and_ends_with_usage():
    events = read(RagResponse,
                  {"message_type": "progress", "progress": "searching"},
                  {"message_type": "metadata", "sources": SOURCES, "subqueries": ["a"]},
                  {"message_type": "chunk", "chunk": "he", "in_token": 2},
                  {"message_type": "chunk", "chunk": "llo"},
                  {"message_type": "chunk", "chunk": "", "end_of_stream": True,
                   "sources": SOURCES, "in_token": 3, "out_token": 2, "model": "m"})
    assert events == [Progress("searching"), Opened(SOURCES, None, ["a"]), Text("he"),
                      Text("llo"), Done(Usage(5, 2, "m"), SOURCES)]


def test_a_one_record_answer_opens_with_the_declared_defaults():
    assert read(RagResponse, {"response": "all", "end_of_stream": True}) == [
        Opened([], None, []), Text("all"), Done(Usage(), [])]
    # A service that declares no opening says nothing of sources it did not send.
    assert read(TextCompletionResponse, {"response": "a"}, {"response": "", "end_of_stream":
                                                           True}) == [
        Opened(None), Text("a"), Done(Usage())]


def test_the_agent_s_kinds_are_steps_the_answer_and_errors():
    events = read(AgentResponse,
                  {"chunk_type": "thought", "content": "route", "end_of_message": True,
                   "session_id": "s"},
                  {"chunk_type": "thought", "content": ""},  # an empty piece: nothing
                  {"chunk_type": "action", "content": "search", "tool": "search",
                   "arguments": {"q": "x"}, "end_of_message": True},
                  {"chunk_type": "observation", "content": "seen", "end_of_message": True,
                   "sources": SOURCES},
                  {"chunk_type": "answer", "content": "x"},
                  {"chunk_type": "answer", "content": "", "end_of_message": True,
                   "end_of_dialog": True, "session_id": "s", "in_token": 4})
    assert events == [
        Opened(None, None, [], "s"), Step("thought", "route", True),
        Step("action", "search", True, "search", {"q": "x"}), Sources(SOURCES),
        Step("observation", "seen", True), Text("x"), Text("", True),
        Done(Usage(4), SOURCES, "s")]
    assert read(AgentResponse, {"chunk_type": "error", "content": "no tool",
                                "end_of_dialog": True})[-1] == Failed(
        Error(type="agent-error", message="no tool"))


def test_an_error_record_is_failed_and_nothing_else():
    error = {"type": "llm-error", "message": "down"}
    assert read(RagResponse, {"error": error, "end_of_stream": True}) == [
        Failed(Error(**error))]


def test_a_result_is_the_final_record_s_declared_fields():
    final = {"message_type": "chunk", "chunk": "", "end_of_stream": True, "confidence": 0.5,
             "summary_error": {"type": "llm-error", "message": "down"}}
    [*_, done] = read(LazyRagResponse, final)
    assert done.result == {**dict.fromkeys(LazyRagResponse.result_fields), "confidence": 0.5,
                           "summary_error": final["summary_error"]}
    assert done.failure == Error(type="llm-error", message="down")
    # An API that shows only the text: the failed text is the answer's failure.
    assert read(LazyRagResponse, final, text_only=True)[-1] == Failed(done.failure)
    [*_, prompt] = read(PromptResponse, {"object": "[1, 2]", "end_of_stream": True})
    assert prompt.result == {"object": "[1, 2]"}


# --- a service no API knows: its declarations are all the APIs need ---------------------

class EchoResponse(Response):
    delta_field = "echo"
    opening = {"sources": []}
    result_fields = ("score",)
    brief_fields = ("score",)

    echo: str | None = None
    score: float | None = None


RECORDS = ({"echo": "he"}, {"echo": "y", "end_of_stream": True, "score": 0.5, "in_token": 1})


async def test_a_new_service_is_rendered_as_ndjson_lines_from_its_declarations():
    lines, out = await lines_of(EchoResponse, *((record, "end_of_stream" in record)
                                                for record in RECORDS))
    assert [line["type"] for line in out] == ["metadata", "content", "content", "done"]
    assert out[-1] == {"type": "done", "score": 0.5,
                       "usage": {"in_token": 1, "out_token": None, "model": None}}
    done_model(EchoResponse).model_validate(out[-1])
    assert lines.collected()["response"] == "hey" and lines.collected()["score"] == 0.5


def test_a_new_service_is_rendered_as_openai_chunks_from_its_declarations():
    completion = Completion(Events("c", "echo", include_usage=False), EchoResponse, Usage())
    reader = Reader(EchoResponse)
    sent = b"".join(completion.render(reader.read(record)) for record in RECORDS)
    chunks = [json.loads(event[6:]) for event in sent.split(b"\n\n")
              if event.startswith(b"data: {")]
    assert chunks[0]["sources"] == [] and chunks[-1]["score"] == 0.5
    assert "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks) == "hey"
    assert sent.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("text", ['said "hi" \u00e9\n', "", "\x00\u2028"])
def test_a_templated_line_is_the_same_bytes_as_its_model_writes(text):
    assert json.loads(CONTENT.line(text)) == ContentLine(type="content", delta=text).model_dump()
    assert json.loads(STEPS["thought"].line(text)) == StepLine(
        type="step", chunk_type="thought", delta=text).model_dump(exclude_unset=True)
