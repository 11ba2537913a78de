"""The incremental ReAct parser: whatever way the LLM's output is cut into deltas, the
same thought, action, arguments and answer come out, and text is passed on as soon
as it cannot be the start of a marker."""
import pytest

from trustgraph.agent.react_parser import BadArguments, ReactParser, parse_arguments

TOOL_STEP = ('Thought: The question is about the Moon landing. An Action: is needed\n'
             'Action: knowledge-query\n'
             'Args: {"question": "Who walked on the Moon?"}\n')
FINAL_STEP = ('Thought: The observations name both astronauts.\n'
              'Final Answer: Neil Armstrong and Buzz Aldrin.\n\n'
              'Action: this line is part of the answer\n')


def parse(deltas: list[str]) -> tuple[ReactParser, list[tuple[str, str]]]:
    parser = ReactParser()
    events = []
    for delta in deltas:
        events += parser.feed(delta)
    events += parser.finish()
    return parser, events


def joined(events: list[tuple[str, str]], kind: str) -> str:
    return "".join(text for k, text in events if k == kind)


def splits(text: str):
    """The text in two deltas at every split point, and one character at a time."""
    for i in range(len(text) + 1):
        yield [text[:i], text[i:]]
    yield list(text)


@pytest.mark.parametrize("deltas", list(splits(TOOL_STEP)))
def test_a_tool_step_reads_the_same_at_every_split(deltas):
    parser, events = parse(deltas)
    step = parser.step
    assert step.thought == "The question is about the Moon landing. An Action: is needed"
    assert joined(events, "thought") == step.thought
    assert (step.action, parse_arguments(step.arguments_text)) == (
        "knowledge-query", {"question": "Who walked on the Moon?"})
    assert step.answer is None
    assert [k for k, _ in events].count("thought_end") == 1
    assert events[-1] == ("thought_end", "")


@pytest.mark.parametrize("deltas", list(splits(FINAL_STEP)))
def test_final_answer_reads_the_same_at_every_split(deltas):
    parser, events = parse(deltas)
    assert parser.step.thought == "The observations name both astronauts."
    assert parser.step.answer == ("Neil Armstrong and Buzz Aldrin.\n\n"
                                  "Action: this line is part of the answer")
    assert joined(events, "answer") == parser.step.answer
    kinds = [k for k, _ in events]
    # The thought ends before the first word of the answer.
    assert kinds.index("thought_end") < kinds.index("answer")
    assert parser.step.action == ""


def test_the_thought_is_sent_with_the_first_token_after_its_marker():
    parser = ReactParser()
    assert parser.feed("Thought") == []  # may still be a marker: held
    assert parser.feed(":") == []
    assert parser.feed(" I") == [("thought", "I")]
    assert parser.feed(" need") == [("thought", " need")]
    assert parser.feed(" the\n") == [("thought", " the")]  # the newline is held
    assert parser.feed("Act") == []  # "Act" could be "Action:"
    assert parser.feed("ually more") == [("thought", "\nActually more")]


def test_a_thought_without_its_marker_is_still_a_thought():
    parser, events = parse(["I will look", " it up.\nAction: search\nArgs: {}"])
    assert events[0] == ("thought", "I will look")
    assert (parser.step.thought, parser.step.action) == ("I will look it up.", "search")


def test_final_answer_marker_split_across_deltas():
    deltas = ["Thought: done\nFin", "al An", "swer", ": 4", "2"]
    parser, events = parse(deltas)
    assert joined(events, "answer") == "42" and parser.step.answer == "42"


def test_markers_only_count_at_the_start_of_a_line():
    parser, events = parse(["Thought: I could say Final Answer: 4 but ",
                            "Action: is better\nAction: calc\nArgs: {\"e\": \"2+2\"}"])
    assert parser.step.thought == "I could say Final Answer: 4 but Action: is better"
    assert parser.step.answer is None and parser.step.action == "calc"


def test_a_made_up_observation_ends_the_step():
    parser = ReactParser()
    parser.feed('Thought: t\nAction: calc\nArgs: {"e": 1}\nObservation')
    assert not parser.stopped
    parser.feed(": 5\nThought: so")
    assert parser.stopped
    parser.finish()
    assert parser.step.arguments_text.strip() == '{"e": 1}'


def test_action_input_is_read_as_args_and_json_may_follow_the_action_line():
    parser, _ = parse(['Thought: t\nAction: "calc"\nAction Input: {"e": 2}'])
    assert (parser.step.action, parse_arguments(parser.step.arguments_text)) == (
        "calc", {"e": 2})
    parser, _ = parse(['Thought: t\nAction: calc\n{"e": 3}\n'])
    assert (parser.step.action, parse_arguments(parser.step.arguments_text)) == (
        "calc", {"e": 3})


def test_a_step_with_neither_action_nor_answer():
    parser, events = parse(["Thought: I am not sure what to do."])
    assert events == [("thought", "I am not sure what to do."), ("thought_end", "")]
    assert parser.step.action == "" and parser.step.answer is None


@pytest.mark.parametrize("text, value", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('  the arguments: {"a": [1, 2]} ok', {"a": [1, 2]}),
    ("", {}),
])
def test_arguments(text, value):
    assert parse_arguments(text) == value


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"just a string"'])
def test_bad_arguments(text):
    with pytest.raises(BadArguments):
        parse_arguments(text)


def test_markdown_around_markers():
    parser, events = parse(["**Thought:** I should", " add.\n**Action:** calc\n",
                            '**Args:** {"e": 1}\n'])
    assert (parser.step.thought, parser.step.action) == ("I should add.", "calc")
    assert parse_arguments(parser.step.arguments_text) == {"e": 1}
    parser, _ = parse(["**Bold** claims stay thoughts.\n### Final Answer: 42"])
    assert parser.step.thought == "**Bold** claims stay thoughts." and parser.step.answer == "42"
