"""LLM tokens as an operator reads them, on a stack tg-start runs: a model's prices
set with tg-set-token-costs and read back with tg-show-token-costs (and by
TrustGraph's layout, config type token-cost); every answer's tokens on the gateway's
/metrics per flow, user and model, with their cost; tg-show-usage's daily rows
once the gateway has reported them to the keys service; tg-show-token-rate's
samples."""
import json
import urllib.request

from tests.support.cli import run_command
from tests.support.scripted_llm import PROMPT_TOKENS, Script
from tests.support.stack import Stack, openai_server_thread

MODEL = "fake-gpt"  # what the scripted server names itself
ANSWER_TOKENS = 5


def cli(stack: Stack, command: str, *argv: str) -> str:
    status, out, err = run_command(command, ["-u", stack.gateway_url, *argv])
    assert status == 0, (command, out, err)
    return out


def metric(stack: Stack, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples with ``labels``, as /metrics says now."""
    text = urllib.request.urlopen(f"{stack.gateway_url}metrics").read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_tokens_costs_and_daily_usage():
    with openai_server_thread(Script(tokens=ANSWER_TOKENS)) as llm, Stack(env={
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
            "TG_USAGE_REPORT": "0.5"}) as stack:
        assert "set" in cli(stack, "tg-set-token-costs", "--model", MODEL, "-i", "2", "-o", "8")
        costs = cli(stack, "tg-show-token-costs")
        assert any(row.split() == [MODEL, "2.000", "8.000"] for row in costs.splitlines()), costs
        item = json.loads(cli(stack, "tg-get-config-item", "--type", "token-cost", "--key",
                              MODEL))
        assert item == {"input_price": 2e-6, "output_price": 8e-6}

        for _ in range(2):
            cli(stack, "tg-invoke-llm", "system", "say something")
        labels = {"flow": "default", "model": MODEL}
        assert metric(stack, "tg_llm_tokens_total", direction="in", **labels) == 2 * PROMPT_TOKENS
        assert metric(stack, "tg_llm_tokens_total", direction="out", **labels) == 2 * ANSWER_TOKENS
        expected = 2 * (PROMPT_TOKENS * 2e-6 + ANSWER_TOKENS * 8e-6)
        assert abs(metric(stack, "tg_llm_cost_dollars_total", **labels) - expected) < 1e-12

        def reported() -> str | None:
            out = cli(stack, "tg-show-usage", "--format", "json")
            rows = [r for r in json.loads(out)["rows"] if r["model"] == MODEL]
            return out if rows and rows[0]["requests"] == 2 else None
        rows = json.loads(stack.wait_for(reported, 20, "the usage reported"))["rows"]
        row = next(r for r in rows if r["model"] == MODEL)
        assert (row["flow"], row["in_tokens"], row["out_tokens"]) == (
            "default", 2 * PROMPT_TOKENS, 2 * ANSWER_TOKENS)
        assert abs(row["cost"] - expected) < 1e-9
        table = cli(stack, "tg-show-usage", "-d", "7")
        assert MODEL in table and f"{2 * PROMPT_TOKENS}" in table

        rate = cli(stack, "tg-show-token-rate", "-p", "1", "-n", "1")
        assert rate.splitlines()[0].split() == ["input/s", "output/s", "total/s", "average/s"]
        assert len(rate.splitlines()) == 2
