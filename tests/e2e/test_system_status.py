"""The platform's state as an operator reads it, on a stack tg-start runs:
``tg-verify-system-status`` passes once everything is up, and fails naming the part
when a processor of a running flow is killed (tg-start held still meanwhile, so it
does not restart it), then passes again once tg-start has restarted it;
``tg-show-processor-state`` and ``tg-show-flow-state`` say the same."""
import os
import signal

from tests.support.cli import run_command
from tests.support.stack import Stack, openai_server_thread
from trustgraph.run.rundir import alive

KILLED = "decoder"  # a processor of flow default, in a process of its own
PERIOD = "0.5"  # TG_STATE_PERIOD: down after three periods unheard


def verify(stack: Stack, timeout: int) -> tuple[int, str]:
    status, out, err = run_command("tg-verify-system-status", [
        "-u", stack.gateway_url, "--global-timeout", str(timeout), "--retry-delay", "1",
        "--check-timeout", "20"])
    return status, out + err


def line(out: str, check: str) -> str:
    return next((row for row in out.splitlines() if f"  {check}  " in f"{row}  "), "")


def down(stack: Stack) -> str | None:
    """tg-show-processor-state's table once it shows the killed processor down."""
    _, table, _ = run_command("tg-show-processor-state", ["-u", stack.gateway_url])
    shown = any(row.startswith(KILLED) and "DOWN" in row for row in table.splitlines())
    return table if shown else None


def test_verify_passes_then_names_a_killed_processor():
    with openai_server_thread() as llm, Stack(env={
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
            "TG_STATE_PERIOD": PERIOD}, startup_timeout=120) as stack:
        status, out = verify(stack, 60)
        assert status == 0, out
        for check in ("gateway", "broker", f"flow default: {KILLED}",
                      "flow default: embeddings model", "flow default: LLM",
                      "store triples (triples-store)", "store vectors (vector-store)",
                      "workbench"):
            assert line(out, check).startswith("PASS"), (check, out)
        assert llm.asked()["max_tokens"] == 1  # the LLM's probe asks one token

        supervisor = stack.process.pid
        os.kill(supervisor, signal.SIGSTOP)  # tg-start would restart it at once
        try:
            killed = stack.kill(KILLED)
            stack.wait_for(lambda: not alive(killed), 10, f"{KILLED} to die")
            # Known down once three of its periods pass unheard.
            processors = stack.wait_for(lambda: down(stack), 10, f"{KILLED} shown down")
            status, out = verify(stack, 4)
            _, flow, _ = run_command("tg-show-flow-state", ["-u", stack.gateway_url])
        finally:
            os.kill(supervisor, signal.SIGCONT)
        assert status == 1, out
        failed = line(out, f"flow default: {KILLED}")
        assert failed.startswith("FAIL") and "not heard for" in failed, out
        assert f"failing: flow default: {KILLED}" in out
        assert line(out, "broker").startswith("PASS"), out
        assert "broker: up" in processors, processors
        assert "NOT every processor serves it" in flow, flow
        assert any(row.startswith(KILLED) and " NO " in row for row in flow.splitlines()), flow

        stack.wait_restarted(KILLED, killed)
        status, out = verify(stack, 60)
        assert status == 0, out
