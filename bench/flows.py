"""``python -m bench.flows``: how soon a flow started while the stack runs answers.

``tg-start`` runs the default stack with a scripted OpenAI-format LLM (its own
process, answering at once). Each run starts a new flow from the default blueprint
(``start-flow``, through the gateway, as ``tg-start-flow`` does) and at once asks
it a text-completion; the time from sending ``start-flow`` to that answer is the
time for the flow to be served: the config change announced, every processor of the
answering group subscribed to its topics (a request sent before is sent again by
its requester, every second), the answer back. The flow is stopped after its run.
Reported: each run, p50 and max (target: at most 2 s).
"""
import argparse
import asyncio
import time

from bench.stats import median
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph

TARGET = 2.0  # seconds from start-flow to the first answer on the new flow


async def measure(gateway_url: str, runs: int) -> list[float]:
    took: list[float] = []
    async with AsyncTrustGraph(gateway_url) as client:
        await client.text_completion("", "warm up")  # the default flow, answering
        for run in range(runs):
            flow = f"bench-{run}"
            started = time.perf_counter()
            await client.start_flow(flow, "default", "bench.flows")
            await client.text_completion("", "hello", flow=flow)
            took.append(time.perf_counter() - started)
            print(f"run {run + 1}: {took[-1]:.3f} s", flush=True)
            await client.stop_flow(flow)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with llm_server(5, 0.0, 0.0) as url:
        with Stack(env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING"}, startup_timeout=120.0) as stack:
            took = asyncio.run(measure(stack.gateway_url, args.runs))
    print(f"\nstart-flow to the first answer on the new flow, {args.runs} runs, default "
          f"stack: p50 {median(took):.3f} s, max {max(took):.3f} s (target <= {TARGET:g} s)")


if __name__ == "__main__":
    main()
