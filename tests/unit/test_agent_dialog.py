"""Agent dialogs with a scripted prompt service and scripted tool services: the frame
sequence of seed 003, token totals over every call, the malformed-step and iteration
limits, the ask pattern's routes, sessions saved only after the answer, and a closed
dialog closing its LLM stream."""
import asyncio
from contextlib import aclosing
from dataclasses import dataclass

import pytest

from tests.support.agent_llm import final, step
from trustgraph.agent.ask import AskLimits, Prepared, ask, final_prompt, parse_route
from trustgraph.agent.dialog import Dialog, run_dialog
from trustgraph.agent.react import MAX_MALFORMED, ReactLimits, react
from trustgraph.agent.sessions import SessionStore, Turn
from trustgraph.agent.toolbox import Toolbox
from trustgraph.base import Delta, HandledError, Items, PromptResult, ServiceError
from trustgraph.base.relay import as_record
from trustgraph.schema import (
    AgentRequest,
    AgentResponse,
    DocumentEmbeddingsResponse,
    EmbeddingsResponse,
    Error,
    PromptResponse,
    RagResponse,
    ScoredChunk,
    Usage,
    encode,
)
from trustgraph.schema.text_completion import OFF_SCHEMA

STEP_1 = step("I need facts.", "knowledge-query", question="Who?")
STEP_2 = final("Now I know.", "Neil Armstrong.")
LLM_IN, LLM_OUT, RAG_IN, RAG_OUT = 100, 20, 7, 3


@dataclass
class Refused:
    """A reply that text-completion's check refuses once it has streamed: off the
    step schema, or cut short."""
    text: str
    problem: str


class ScriptedPrompts:
    """``PromptClient``: each call answers the next scripted text (streamed in
    4-character deltas; a ``Refused`` one then fails), or a json template its
    object; remembers the calls, their schemas and closed streams."""

    def __init__(self, texts: list[str], objects: dict[str, object] | None = None,
                 block_after: int | None = None) -> None:
        self.texts = list(texts)
        self.objects = objects or {}
        self.calls: list[tuple[str, dict]] = []
        self.schemas: list[dict | None] = []
        self.closed = 0
        self.block_after = block_after  # deltas a stream sends before it stalls

    async def stream(self, id, variables, last, model=None, schema=None):
        self.calls.append((id, variables))
        self.schemas.append(schema)
        text = self.texts.pop(0)
        text, error = (text.text, Error(type=OFF_SCHEMA, message=text.problem)) \
            if isinstance(text, Refused) else (text, None)
        try:
            for i in range(0, len(text), 4):
                yield Delta(text[i:i + 4])
                if self.block_after is not None and i // 4 + 1 >= self.block_after:
                    await asyncio.Event().wait()  # an LLM that goes quiet mid-answer
            if error is not None:
                raise ServiceError(error)
            yield last(PromptResponse(text="", end_of_stream=True, in_token=LLM_IN,
                                      out_token=LLM_OUT, model="m"))
        except GeneratorExit:
            self.closed += 1
            raise

    async def invoke(self, id, variables, model=None):
        self.calls.append((id, variables))
        if id in self.objects:
            return PromptResult(None, self.objects[id], LLM_IN, LLM_OUT, "m")
        return PromptResult(self.texts.pop(0), None, LLM_IN, LLM_OUT, "m")


class Service:
    def __init__(self, answer) -> None:
        self.answer = answer
        self.requests = []

    async def call(self, request, model):
        self.requests.append(request)
        return self.answer(request)

    async def frames(self, request, request_id=None):
        """A RAG service's answer in one piece, then its end."""
        answer = await self.call(request, RagResponse)
        yield [(encode(RagResponse(message_type="chunk", chunk=answer.response)), False),
               (encode(answer.model_copy(update={"response": None})), True)]


def clients(**services):
    class Clients:
        async def get(self, name):
            return services[name]
    return Clients()


def rag_clients():
    return clients(**{"graph-rag": Service(lambda r: RagResponse(
        response=f"Armstrong ({r.user}/{r.collection})", end_of_stream=True,
        in_token=RAG_IN, out_token=RAG_OUT, model="rag-model"))})


@pytest.fixture
def sessions(tmp_path):
    store = SessionStore(tmp_path / "sessions.db")
    yield store
    store.close()


def dialog(prompts, services, turns=(), sessions=None, **request) -> Dialog:
    return Dialog(AgentRequest(question="Who walked on the Moon?", user="ann",
                               collection="space", **request),
                  "s1", list(turns), services, prompts, Usage(), sessions)


def react_pattern(max_iterations=10):
    return react(Toolbox().offered(None), ReactLimits(max_iterations, 5.0))


async def frames_of(d: Dialog, pattern, sessions) -> list:
    """The dialog's frames as its runner reads them, as records (as they leave the
    process)."""
    d.sessions = sessions
    return [as_record(AgentResponse, frame) if isinstance(frame, Delta) else frame
            async for frame in Items(run_dialog(d, pattern).stream)]


def kinds(frames) -> list[tuple[str, bool, bool]]:
    return [(f.chunk_type, f.end_of_message, f.end_of_dialog) for f in frames]


def collapsed(frames) -> list[tuple[str, bool, bool]]:
    """Runs of the same (type, flags) as one: the seed 003 sequence."""
    out = []
    for item in kinds(frames):
        if not out or out[-1] != item:
            out.append(item)
    return out


async def test_two_iteration_dialog_frames_in_seed_order(sessions):
    prompts = ScriptedPrompts([STEP_1, STEP_2])
    services = rag_clients()
    frames = await frames_of(dialog(prompts, services, streaming=True), react_pattern(),
                             sessions)
    assert collapsed(frames) == [
        ("thought", False, False), ("thought", True, False),
        ("action", True, False), ("observation", True, False),
        ("thought", False, False), ("thought", True, False),
        ("answer", False, False), ("answer", True, True)]
    assert all(f.message_type == f.chunk_type for f in frames)
    thoughts = "".join(f.content for f in frames[:frames.index(
        next(f for f in frames if f.chunk_type == "action"))])
    assert thoughts == "I need facts."
    action = next(f for f in frames if f.chunk_type == "action")
    assert (action.content, action.tool, action.arguments) == (
        "knowledge-query", "knowledge-query", {"question": "Who?"})
    observation = next(f for f in frames if f.chunk_type == "observation")
    assert observation.content == "Armstrong (ann/space)"  # the user's own collection
    assert "".join(f.content for f in frames if f.chunk_type == "answer") == "Neil Armstrong."
    final = frames[-1]
    assert (final.in_token, final.out_token, final.model) == (
        2 * LLM_IN + RAG_IN, 2 * LLM_OUT + RAG_OUT, "m")
    assert frames[0].session_id == final.session_id == "s1"
    # The second step saw the first, with its observation.
    [_, (template, variables)] = prompts.calls
    assert template == "agent-react"
    assert variables["history"] == [{"thought": "I need facts.", "action": "knowledge-query",
                                     "arguments": {"question": "Who?"},
                                     "observation": "Armstrong (ann/space)"}]
    assert await sessions.turns("ann", "s1", 10) == [
        Turn("Who walked on the Moon?", "Neil Armstrong.")]


async def test_not_streaming_is_the_same_dialog_collected(sessions):
    frames = await frames_of(dialog(ScriptedPrompts([STEP_1, STEP_2]), rag_clients()),
                             react_pattern(), sessions)
    [frame] = frames
    assert kinds(frames) == [("answer", True, True)]
    assert frame.content == "Neil Armstrong." and frame.session_id == "s1"
    assert frame.out_token == 2 * LLM_OUT + RAG_OUT


NO_NEXT = "the model's answer does not match its schema at /: 'next' is a required property"
CUT = "the model's answer is not valid JSON (EOF while parsing a string)"


async def test_replies_off_the_step_schema_are_told_to_the_model_then_fail(sessions):
    bad = [Refused('{"thought": "hmm."}', NO_NEXT),
           Refused('{"thought": "t", "next": {"tool": "knowledge-query", "argu', CUT),
           Refused('{"thought": "t", "next": {"tool": "knowledge-query", "arguments": {', CUT)]
    prompts = ScriptedPrompts(bad[:MAX_MALFORMED] + [STEP_2])
    frames = await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(),
                             sessions)
    told = [f.content for f in frames if f.chunk_type == "observation"]
    assert told == [f"Your reply could not be used: {NO_NEXT}",
                    f"Your reply could not be used: {CUT}"]
    # Each refused step's thought streamed, and ended, before what the model is told.
    assert collapsed(frames)[:3] == [("thought", False, False), ("thought", True, False),
                                     ("observation", True, False)]
    assert frames[-1].end_of_dialog and frames[-1].chunk_type == "answer"

    prompts = ScriptedPrompts(bad)
    with pytest.raises(HandledError, match="could not be followed 3 times; last: the "
                                           "model's answer is not valid JSON"):
        await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(),
                        sessions)
    assert await sessions.turns("ann", "s1", 10) == [Turn("Who walked on the Moon?",
                                                          "Neil Armstrong.")]


async def test_a_tool_the_server_let_through_unoffered_is_told_to_the_model(sessions):
    prompts = ScriptedPrompts([step("t", "no-such-tool"), STEP_2])
    frames = await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(),
                             sessions)
    [told] = [f.content for f in frames if f.chunk_type == "observation"]
    assert "there is no tool called 'no-such-tool'" in told


async def test_an_answer_cut_short_ends_the_dialog_as_it_stands(sessions):
    prompts = ScriptedPrompts([Refused('{"thought": "I know.", "next": {"final_answer": '
                                       '"Neil Arm', CUT)])
    frames = await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(),
                             sessions)
    assert "".join(f.content for f in frames if f.chunk_type == "answer") == "Neil Arm"
    assert frames[-1].end_of_dialog and not any(f.chunk_type == "error" for f in frames)


def offers_tools(schema: dict) -> bool:
    return "anyOf" in schema["properties"]["next"]


async def test_each_step_is_asked_under_the_step_schema_the_last_one_answer_only(sessions):
    prompts = ScriptedPrompts([STEP_1, STEP_2])
    await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(2), sessions)
    first, last = prompts.schemas
    assert offers_tools(first) and not offers_tools(last)
    tools = [choice["properties"]["tool"]["enum"] for choice in
             first["properties"]["next"]["anyOf"] if "tool" in choice["properties"]]
    assert tools == [["document-query"], ["knowledge-query"]]
    assert last["properties"]["next"]["required"] == ["final_answer"]


async def test_a_repeated_call_is_not_run_again_and_the_next_step_must_answer(sessions):
    prompts = ScriptedPrompts([STEP_1, STEP_1, STEP_2])
    services = rag_clients()
    frames = await frames_of(dialog(prompts, services, streaming=True), react_pattern(),
                             sessions)
    # Its observation is the earlier call's result, given again.
    assert [f.content for f in frames if f.chunk_type == "observation"] == [
        "Armstrong (ann/space)", "Armstrong (ann/space)"]
    assert len((await services.get("graph-rag")).requests) == 1
    assert [offers_tools(schema) for schema in prompts.schemas] == [True, True, False]


async def test_max_iterations_ends_with_a_clear_error(sessions):
    prompts = ScriptedPrompts([STEP_1] * 3)
    with pytest.raises(HandledError,
                       match=r"no final answer within max_iterations \(3\)") as failure:
        await frames_of(dialog(prompts, rag_clients(), streaming=True), react_pattern(3),
                        sessions)
    assert failure.value.type == "agent-error"
    assert await sessions.turns("ann", "s1", 10) == []


async def test_closing_the_dialog_closes_the_llm_stream_and_saves_nothing(sessions):
    prompts = ScriptedPrompts([STEP_2], block_after=4)  # ... '"Now': the thought begins
    d = dialog(prompts, rag_clients(), sessions=sessions, streaming=True)
    async with aclosing(Items(run_dialog(d, react_pattern()).stream)) as frames:
        first = await anext(frames)
    assert first.chunk_type == "thought" and prompts.closed == 1
    assert await sessions.turns("ann", "s1", 10) == []


async def test_an_llm_failure_mid_thought_is_a_clear_agent_error(sessions):
    class Failing(ScriptedPrompts):
        async def stream(self, id, variables, last, model=None, schema=None):
            yield Delta('{"thought": "I ')
            raise ServiceError(Error(type="text-completion-error", message="rate limited"))

    with pytest.raises(HandledError, match=r"asking the model \(agent-react\) failed: "
                                           r"text-completion-error: rate limited") as failure:
        await frames_of(dialog(Failing([]), rag_clients(), streaming=True), react_pattern(),
                        sessions)
    assert failure.value.type == "agent-error"


async def test_closing_an_ask_dialog_mid_answer_closes_the_llm_stream(sessions):
    prompts = ScriptedPrompts(["a long answer, slowly"], block_after=1,
                              objects={"agent-classify": {"route": "code"}})
    d = dialog(prompts, clients(), sessions=sessions, streaming=True, pattern="ask")
    async with aclosing(Items(run_dialog(d, ask(AskLimits("document", 5))).stream)) as frames:
        assert (await anext(frames)).route == "code"
        assert (await anext(frames)).text == "a lo"
    assert prompts.closed == 1
    assert await sessions.turns("ann", "s1", 10) == []


def test_route_parsing():
    for value in ({"route": "knowledge"}, {"route": " Code "}, '"conversational"',
                  "Knowledge."):
        assert parse_route(value) in ("knowledge", "code", "conversational")
    assert parse_route({"route": "CODE"}) == "code"
    for value in ({"route": "weather"}, {}, ["knowledge"], None):
        with pytest.raises(HandledError, match="agent-classify prompt answered"):
            parse_route(value)


def test_one_final_prompt_for_every_route():
    turns = [Turn("Who flew Apollo 11?", "Armstrong, Aldrin, Collins.")]
    history = [{"question": "Who flew Apollo 11?", "answer": "Armstrong, Aldrin, Collins."}]
    assert final_prompt(Prepared("code", "Sort a list in Python"), turns) == (
        "agent-code", {"question": "Sort a list in Python", "history": history})
    assert final_prompt(Prepared("knowledge", "q", evidence={"documents": ["d"]}), []) == (
        "agent-knowledge", {"question": "q", "history": [], "documents": ["d"]})


def retrieval_services() -> dict[str, Service]:
    chunk = ScoredChunk(chunk_id="moon.txt/c0", text="Armstrong walked.", score=0.8,
                        document_id="moon.txt", title="Moon")
    return {"embeddings": Service(lambda r: EmbeddingsResponse(vectors=[[0.1, 0.2]])),
            "document-embeddings": Service(lambda r: DocumentEmbeddingsResponse(
                chunks=[chunk]))}


@pytest.mark.parametrize("route", ["knowledge", "code", "conversational"])
async def test_ask_route_thought_then_streamed_answer(sessions, route):
    prompts = ScriptedPrompts(["the answer"], objects={"agent-classify": {"route": route}})
    services = retrieval_services()
    turns = [Turn("Tell me about Apollo 11", "It landed on the Moon.")]
    prompts.texts.insert(0, "Who walked on the Moon during Apollo 11?")  # the reformulation
    frames = await frames_of(dialog(prompts, clients(**services), turns, streaming=True,
                                    pattern="ask"),
                             ask(AskLimits("document", 5)), sessions)
    thought, *answers = frames
    assert (thought.chunk_type, thought.end_of_message, thought.route) == (
        "thought", True, route)
    assert "Who walked on the Moon during Apollo 11?" in thought.content
    if route == "knowledge":
        assert [s.document_id for s in thought.sources] == ["moon.txt"]
        # Retrieval searched for the question as reformulated, in the user's collection.
        [embedded] = services["embeddings"].requests
        assert embedded.texts == ["Who walked on the Moon during Apollo 11?"]
        [searched] = services["document-embeddings"].requests
        assert (searched.user, searched.collection) == ("ann", "space")
        assert prompts.calls[-1][1]["documents"] == ["Armstrong walked."]
    else:
        assert thought.sources == []
    assert "".join(f.content for f in answers) == "the answer"
    assert [id for id, _ in prompts.calls][-1] == f"agent-{route}"
    # classify, reformulate and the answer: three LLM calls summed.
    assert frames[-1].in_token == 3 * LLM_IN and frames[-1].end_of_dialog


async def test_the_session_store_keeps_each_users_turns_apart(sessions):
    for n in range(3):
        await sessions.save("ann", "s", f"q{n}", f"a{n}")
    await sessions.save("bob", "s", "bob's q", "bob's a")
    assert await sessions.turns("ann", "s", 2) == [Turn("q1", "a1"), Turn("q2", "a2")]
    assert await sessions.turns("bob", "s", 10) == [Turn("bob's q", "bob's a")]
    assert await sessions.turns("ann", "other", 10) == []
