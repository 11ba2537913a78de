"""The prompt and config commands (tg-invoke-prompt, tg-show-prompts, tg-show-config,
tg-set-prompt, tg-delete-prompt) against ``tg-start`` running config, prompt,
text-completion and the gateway, the LLM a local OpenAI-format server. The commands'
``main`` runs in this process (tests/support/cli.py), except for Ctrl-C, which is
about the installed script's process."""
import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from tests.support.cli import tg_command
from tests.support.openai_server import expected_text
from tests.support.stack import Stack, openai_server_thread
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES
from trustgraph.schema import PromptTemplate

BIN = Path(sys.executable).parent
DEADLINE = 30.0
SCHEMA = {"type": "array", "items": {"type": "string"}}


@pytest.fixture(scope="module")
def stack():
    with openai_server_thread() as llm, Stack(
            env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test"},
            processors=["config", "prompt", "text-completion", "gateway"]) as stack:
        yield stack


async def start(stack: Stack, command: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(BIN / command), "-u", stack.gateway_url, *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def tg(stack: Stack, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", stack.gateway_url, *args, timeout=DEADLINE)


async def show_config(stack: Stack) -> dict:
    code, stdout, stderr = await tg(stack, "tg-show-config")
    assert (code, stderr) == (0, "")
    return json.loads(stdout)


async def test_show_config_prints_everything_with_its_version(stack):
    shown = await show_config(stack)
    assert set(shown) == {"version", "config"} and shown["version"] >= 1
    # laid out as TrustGraph's tools read them (docs/prompts.md)
    assert {f"template.{id}" for id in DEFAULT_TEMPLATES} <= set(shown["config"]["prompt"])
    assert shown["config"]["prompt"]["template.kg-prompt"] == \
        DEFAULT_TEMPLATES["kg-prompt"].config_value()


async def test_show_prompts_lists_the_shipped_templates(stack):
    code, stdout, stderr = await tg(stack, "tg-show-prompts")
    assert (code, stderr) == (0, "")
    headers = [line for line in stdout.splitlines() if line and not line.startswith(" ")]
    assert sorted(DEFAULT_TEMPLATES) == [h for h in headers if h in DEFAULT_TEMPLATES]
    decompose = stdout.split("\n\nquery-decompose\n", 1)[1].split("\n\n")[0]
    assert decompose.startswith("  response type: json\n  system:\n    ")
    assert "\n  prompt:\n    " in decompose and "\n  schema:\n    {" in decompose


async def test_set_show_and_delete_a_prompt(stack, tmp_path):
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    before = (await show_config(stack))["version"]
    assert await tg(stack, "tg-set-prompt", "--id", "names", "--system", "Reply in JSON.",
                    "--prompt", "Names in:\n{{ text }}", "--response-type", "json",
                    "--schema", f"@{schema_file}") == (0, "", "")

    shown = await show_config(stack)
    assert shown["version"] == before + 1
    assert shown["config"]["prompt"]["template.names"] == PromptTemplate(
        system="Reply in JSON.", prompt="Names in:\n{{ text }}", response_type="json",
        schema=SCHEMA).config_value()
    _, listing, _ = await tg(stack, "tg-show-prompts")
    assert ("\n\nnames\n  response type: json\n  system:\n    Reply in JSON.\n"
            "  prompt:\n    Names in:\n    {{ text }}\n  schema:\n    {\n"
            '      "type": "array",\n') in listing

    assert await tg(stack, "tg-delete-prompt", "--id", "names") == (0, "", "")
    assert "template.names" not in (await show_config(stack))["config"]["prompt"]
    code, stdout, stderr = await tg(stack, "tg-delete-prompt", "--id", "names")
    assert (code, stdout) == (1, "")
    assert stderr.startswith("tg-delete-prompt: not-found: no prompt template 'names' "
                             "(known: agent-classify, agent-code, agent-conversational, "
                             "agent-knowledge, agent-react, agent-reformulate, document-prompt, ")
    assert stderr.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--response-type", "json", "--schema", "{not json"], "--schema is not JSON"),
    (["--schema", '{"type": "string"}'], "--schema needs --response-type json or jsonl"),
    (["--response-type", "yaml"], "invalid choice: 'yaml'"),
])
async def test_set_prompt_refuses_a_bad_template_and_stores_nothing(stack, args, message):
    before = await show_config(stack)
    code, stdout, stderr = await tg(stack, "tg-set-prompt", "--id", "bad", "--prompt", "p",
                                    *args)
    assert (code, stdout) == (2, "")
    assert message in stderr.splitlines()[-1]
    assert await show_config(stack) == before


async def test_invoke_prompt_streams_a_text_template(stack):
    assert await tg(stack, "tg-invoke-prompt", "document-prompt", "query=RDF? [tokens=30]",
                    "documents:=[]") == (0, expected_text(30) + "\n", "")


async def test_invoke_prompt_without_streaming_and_with_usage(stack):
    code, stdout, stderr = await tg(stack, "tg-invoke-prompt", "--no-streaming",
                                    "--show-usage", "kg-prompt", "query=Who? [tokens=4]",
                                    'knowledge:=[{"s": "Acme", "p": "founded by", "o": "Ann"}]')
    assert (code, stdout) == (0, expected_text(4) + "\n")
    assert stderr == "Input tokens: 11  Output tokens: 4  Model: fake-gpt\n"


@pytest.mark.parametrize("args, expected", [
    (["nope"], "tg-invoke-prompt: not-found: no prompt template 'nope' (known: "),
    (["kg-prompt", "query=Who?"],
     "tg-invoke-prompt: bad-request: template 'kg-prompt': variable 'knowledge' is "
     "undefined (the request gave: query)"),
    (["-f", "elsewhere", "query-rewrite", "query=q"],
     "tg-invoke-prompt: unknown-flow: unknown flow 'elsewhere'"),
])
async def test_invoke_prompt_errors_are_one_line(stack, args, expected):
    code, stdout, stderr = await tg(stack, "tg-invoke-prompt", *args)
    assert (code, stdout) == (1, "")
    assert stderr.startswith(expected) and stderr.count("\n") == 1


async def test_invoke_prompt_keeps_the_text_before_an_llm_error(stack):
    code, stdout, stderr = await tg(stack, "tg-invoke-prompt", "document-prompt",
                                    "query=[tokens=6 fail_after=2]", "documents:=[]")
    assert (code, stdout) == (1, expected_text(2) + "\n")
    assert stderr.startswith("tg-invoke-prompt: llm-error: ") and stderr.count("\n") == 1


async def test_invoke_prompt_ctrl_c_stops_quietly(stack):
    process = await start(stack, "tg-invoke-prompt", "document-prompt",
                          "query=[tokens=1000 delay=0.01]", "documents:=[]")
    first = await asyncio.wait_for(process.stdout.readexactly(5), DEADLINE)
    assert first == b"tok0 "
    process.send_signal(signal.SIGINT)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert (process.returncode, stderr) == (130, b"")
    assert len(first + stdout) < len(expected_text(1000))


async def test_config_item_commands(stack):
    """Any item, with TrustGraph's flags; text that is JSON is stored as that JSON."""
    assert (await tg(stack, "tg-put-config-item", "--type", "limits", "--key", "default",
                     "--value", '{"max": 3}'))[0] == 0
    assert (await tg(stack, "tg-put-config-item", "--type", "limits", "--key", "model",
                     "--value", "gpt-4"))[0] == 0
    assert (await show_config(stack))["config"]["limits"] == {
        "default": {"max": 3}, "model": "gpt-4"}
    assert await tg(stack, "tg-list-config-items", "--type", "limits") == (
        0, "default\nmodel\n", "")
    assert await tg(stack, "tg-list-config-items", "--type", "limits", "--format",
                    "json") == (0, '[\n  "default",\n  "model"\n]\n', "")
    assert await tg(stack, "tg-get-config-item", "--type", "limits", "--key", "model") == (
        0, "gpt-4\n", "")
    assert await tg(stack, "tg-get-config-item", "--type", "limits", "--key", "default",
                    "--format", "json") == (0, '{\n  "max": 3\n}\n', "")
    code, out, err = await tg(stack, "tg-delete-config-item", "--type", "limits", "--key",
                              "model")
    assert code == 0 and out.startswith("config item limits/model deleted")
    code, out, err = await tg(stack, "tg-get-config-item", "--type", "limits", "--key",
                              "model")
    assert (code, out) == (1, "") and err.startswith("tg-get-config-item: not-found: ")
