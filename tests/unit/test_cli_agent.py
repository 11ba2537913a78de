"""tg-invoke-agent and the tool commands without a gateway: how a dialog is printed,
and the options they refuse before connecting (exit status 2, naming why)."""
import io

import pytest

from trustgraph.api import (
    AgentAction,
    AgentAnswer,
    AgentFinal,
    AgentObservation,
    AgentThought,
    Usage,
)
from trustgraph.cli import invoke_agent
from trustgraph.cli.invoke_agent import DIM, PLAIN, DialogPrinter, groups
from trustgraph.cli.tools import TOOLS

# --- tg-invoke-agent's printing -------------------------------------------------------

EVENTS = [AgentThought("I need "), AgentThought("to look", True),
          AgentAction("search", {"q": "ü"}), AgentObservation("line 1\nline 2\n", True),
          AgentAnswer("The "), AgentAnswer("answer", True), AgentFinal(Usage())]


def printed(verbose: bool, dim: bool) -> str:
    out = io.StringIO()
    printer = DialogPrinter(out, verbose, dim)
    for event in EVENTS:
        printer.show(event)
    printer.finish()
    return out.getvalue()


def test_only_the_answer_is_printed_by_default():
    assert printed(verbose=False, dim=True) == "The answer\n"


def test_verbose_labels_each_step_on_lines_of_its_own():
    assert printed(verbose=True, dim=False) == (
        "Thought: I need to look\n"
        'Action: search {"q": "ü"}\n'
        "Observation: line 1\nline 2\n"
        "The answer\n")


def test_verbose_on_a_terminal_dims_the_steps_not_the_answer():
    out = printed(verbose=True, dim=True)
    assert out.startswith(f"{DIM}Thought: I need {PLAIN}{DIM}to look{PLAIN}\n")
    assert out.endswith(f"{DIM}Observation: line 1\nline 2\n{PLAIN}The answer\n")


def test_groups_from_repeated_and_comma_separated_options():
    assert groups(["a", "b, c", ""]) == ["a", "b", "c"]
    assert groups(None) is None


# --- options refused before connecting ------------------------------------------------

def refused(parse, argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit:
        parse(argv)
    assert exit.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize("argv, complaint", [
    ([], "-q/--question"),
    (["-q", "q", "-p", "plan"], "invalid choice: 'plan'"),
    (["-q", "q", "--max-iterations", "0"], "less than 1"),
    (["-q", "q", "--streaming", "--no-streaming"], "not allowed with"),
])
def test_invoke_agent_refuses(argv, complaint, capsys):
    assert complaint in refused(invoke_agent.parse, argv, capsys)


def test_invoke_agent_defaults():
    args = invoke_agent.parse(["-q", "q"])
    assert (args.streaming, args.verbose, args.pattern, args.group, args.session,
            args.user, args.collection, args.flow_id) == (
        True, False, None, None, None, None, "default", "default")  # user: the key's
    assert invoke_agent.parse(["-q", "q", "--session"]).session == invoke_agent.NEW_SESSION


@pytest.mark.parametrize("argv, complaint", [
    (["--kind", "prompt"], "a prompt tool needs template"),
    (["--kind", "mcp-tool"], "an mcp-tool needs url"),
    (["--kind", "search"], "invalid choice: 'search'"),
    (["--kind", "text-completion", "--argument", ":string"], "give NAME:TYPE:DESCRIPTION"),
    (["--kind", "prompt", "--template", "t", "--description", ""], "description:"),
])
def test_set_tool_refuses_an_invalid_tool(argv, complaint, capsys):
    err = refused(TOOLS.parse_set, ["--id", "t", "--description", "d", *argv], capsys)
    assert complaint in err, err


def test_set_tool_builds_the_stored_value():
    args = TOOLS.parse_set(["--id", "ask", "--description", "Ask.", "--kind", "prompt",
                           "--template", "question", "--group", "g",
                           "--argument", "topic", "--argument", "n:number:how many: at most"])
    assert args.item.config_value() == {
        "name": "ask", "description": "Ask.", "type": "prompt", "group": ["g"],
        "arguments": [{"name": "topic", "type": "string", "description": ""},
                      {"name": "n", "type": "number", "description": "how many: at most"}],
        "template": "question"}
