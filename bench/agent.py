"""``make bench`` (agent part): what the agent adds to each of its LLM calls, beyond
the LLM's own time to first token, and beyond what the same LLM call costs when a
client asks the prompt service for it straight through the gateway.

The answering part of the default stack runs under ``tg-start`` (the agent in the
prompt+text-completion+graph-rag+document-rag+agent process group). The LLM is the
scripted OpenAI-format server on a thread of this process (first token after 200 ms,
then one word every 10 ms), replying to each prompt as scripted and noting when each
request arrived and when each word left, on this process's clock. One request at a
time over the gateway websocket. "Added" is what is left of a span once the LLM's
own time in it is taken out:

* ``react``, two iterations; step 1 calls a ``text-completion`` tool (an LLM call of
  its own, so no retrieval hides in the numbers), step 2 gives the Final Answer.
  R1 thought: request sent → first thought word at the client; tool call: R1's last
  word → the tool's request, plus the tool's answer → the observation at the client;
  R2 thought: the tool's answer → R2's first thought word at the client; R2 answer:
  the LLM sending the answer's first word → the client receiving it.
* ``ask`` in a session with one earlier turn (classify and reformulate both run, at
  once), on the conversational route (no retrieval): classify+reformulate: request
  sent → the later of their arrivals; answer: the later of their answers → the
  first answer word at the client (the route thought is sent in between). The
  knowledge route is timed the same way, with DocumentRAG retrieval (the question
  embedded, the vector search) inside its answer's number.
* baselines, the same kinds of call without the agent: a streamed text prompt and a
  JSON prompt asked of the prompt service through the gateway (stream: sent → first
  word at the client; return: the LLM sending it → the client receiving it; json:
  sent → answer; outbound: sent → the LLM request; the LLM's own time taken out),
  and retrieval: the question embedded and the chunks searched, service by service.

"agent's own" subtracts the matching baseline's median: what the agent adds beyond
one streamed (or JSON) prompt call made through the gateway.
"""
import argparse
import asyncio
import itertools
import json
import os
import time

import aiohttp

from bench.stats import median, ms, percentile
from tests.support.agent_llm import AgentReplies, final, step
from tests.support.scripted_llm import Call, Script, words
from tests.support.stack import Stack, openai_server_thread
from trustgraph.api import AsyncTrustGraph

PROCESSORS = ["config", "prompt+text-completion+graph-rag+document-rag+agent",
              "embeddings", "triples-store", "vector-store", "gateway"]
TOOL = {"name": "ask-llm", "kind": "text-completion", "group": ["bench"],
        "description": "Asks the language model a question.",
        "arguments": [{"name": "question", "type": "string"}]}
THOUGHT = "I should ask the model about this before answering the question."
ANSWER = "The answer, from what the model said, is forty two."
# A step is JSON (the step schema), streamed a word at a time: '{"thought": ' opens
# it, and the thought starts with word 1; the answer with the word after
# '{"final_answer": '.
FIRST_THOUGHT_WORD = 1
FIRST_ANSWER_WORD = words(final(THOUGHT, ANSWER)).index('{"final_answer": ') + 1
# Which baseline each call is compared with.
BASELINE = {"R1 thought": ("stream",), "tool call": ("json",), "R2 thought": ("stream",),
            "R2 answer": ("return",), "classify+reformulate": ("outbound",),
            "answer": ("stream",), "answer (with retrieval)": ("stream", "retrieval")}

_ids = itertools.count()


async def request(ws: aiohttp.ClientWebSocketResponse, service: str, body: dict
                  ) -> tuple[float, list[tuple[float, dict]]]:
    """(time sent, [(time received, response)]) of one streamed request."""
    sent = time.perf_counter()
    await ws.send_str(json.dumps({"id": f"b{next(_ids)}", "service": service,
                                  "request": {"streaming": True, **body}}))
    frames = []
    async for message in ws:
        frame = json.loads(message.data)
        response = frame.get("response") or {}
        if "error" in frame or "error" in response:
            raise RuntimeError(f"{service}: {frame}")
        frames.append((time.perf_counter(), response))
        if frame["complete"]:
            return sent, frames
    raise RuntimeError("socket closed")


def first(frames: list, kind: str, after: float = 0.0) -> float:
    return next(t for t, r in frames
                if t > after and r.get("chunk_type") == kind and r["content"])


def react_sample(sent: float, frames: list, calls: list[Call]) -> dict:
    r1, tool, r2 = calls
    observed = first(frames, "observation")
    return {
        "R1 thought": first(frames, "thought") - sent - (r1.written[FIRST_THOUGHT_WORD]
                                                         - r1.arrived),
        "tool call": (tool.arrived - r1.done) + (observed - tool.done),
        "R2 thought": first(frames, "thought", observed) - tool.done - (
            r2.written[FIRST_THOUGHT_WORD] - r2.arrived),
        "R2 answer": first(frames, "answer") - r2.written[FIRST_ANSWER_WORD]}


def ask_sample(sent: float, frames: list, calls: list[Call], answer: str = "answer"
               ) -> dict:
    *prepare, answer_call = calls
    arrived, done = max(c.arrived for c in prepare), max(c.done for c in prepare)
    return {"classify+reformulate": arrived - sent,
            answer: first(frames, "answer") - done - (answer_call.written[0]
                                                      - answer_call.arrived)}


def knowledge_sample(sent: float, frames: list, calls: list[Call]) -> dict:
    return ask_sample(sent, frames, calls, "answer (with retrieval)")


def baseline_sample(stream: tuple, json_call: tuple) -> dict:
    (sent, frames), call = stream
    received = next(t for t, r in frames if r.get("text"))
    (json_sent, json_frames), answer = json_call
    return {"stream": received - sent - (call.written[0] - call.arrived),
            "return": received - call.written[0],
            "json": json_frames[-1][0] - json_sent - (answer.done - answer.arrived),
            "outbound": answer.arrived - json_sent}


async def one_round(ws, llm, n: int) -> dict[str, dict]:
    replies: AgentReplies = llm.reply
    question = f"Question number {n}?"
    replies.react[question] = [step(THOUGHT, "ask-llm", question="what is it?"),
                               final(THOUGHT, ANSWER)]
    found = {"react": await _timed(llm, react_sample, request(
        ws, "agent", {"question": question, "group": ["bench"]}))}
    for route, name, sample in (("conversational", "ask", ask_sample),
                                ("knowledge", "ask (knowledge)", knowledge_sample)):
        # Whole questions as keys: "And then 1" would also match "And then 12".
        first_turn, second_turn = f"Hello {n} {route}?", f"And then {n} {route}?"
        replies.routes |= {first_turn: route, second_turn: route}
        session = {"pattern": "ask", "session_id": f"s{n}-{route}"}
        await request(ws, "agent", {"question": first_turn, **session})
        found[name] = await _timed(llm, sample, request(
            ws, "agent", {"question": second_turn, **session}))
    stream = await _called(llm, request(ws, "prompt", {
        "id": "agent-conversational", "variables": {"question": "hi", "history": []}}))
    replies.routes[f"Baseline {n}?"] = "code"
    json_call = await _called(llm, request(ws, "prompt", {
        "id": "agent-classify", "variables": {"question": f"Baseline {n}?", "history": []}}))
    found["baseline (prompt via gateway)"] = {
        **baseline_sample(stream, json_call), "retrieval": await retrieval(ws, n)}
    return found


async def retrieval(ws: aiohttp.ClientWebSocketResponse, n: int) -> float:
    """What the knowledge route's retrieval costs asked of the services straight: the
    question embedded, then the nearest chunks searched."""
    started = time.perf_counter()
    _, frames = await request(ws, "embeddings", {"texts": [f"And then {n} knowledge?"]})
    [vector] = frames[-1][1]["vectors"]
    await request(ws, "document-embeddings", {"vector": vector, "limit": 10})
    return time.perf_counter() - started


async def _timed(llm, sample, dialog) -> dict:
    before = len(llm.arrivals)
    sent, frames = await dialog
    return sample(sent, frames, llm.arrivals[before:])


async def _called(llm, call) -> tuple:
    before = len(llm.arrivals)
    result = await call
    [made] = llm.arrivals[before:]
    return result, made


async def offered(ws: aiohttp.ClientWebSocketResponse, llm, timeout: float = 10.0) -> None:
    """Until the agent offers the bench's tool (config changes reach it by notice)."""
    llm.reply.react["Which tools"] = [final("I see them.", "These.")]
    deadline = time.monotonic() + timeout
    while True:
        await request(ws, "agent", {"question": "Which tools are there?", "group": ["bench"]})
        if "- ask-llm:" in llm.prompts[-1]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the agent never offered the bench tool")
        await asyncio.sleep(0.1)


async def measure(stack: Stack, llm, rounds: int) -> dict[str, list[dict]]:
    async with AsyncTrustGraph(stack.gateway_url) as client:
        await client.put_config({"tool": {"bench-llm": TOOL}})
    found: dict[str, list[dict]] = {}
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(stack.websocket_url, max_msg_size=0)
        await offered(ws, llm)
        await one_round(ws, llm, 0)  # warm-up: requesters, the embedding model
        for n in range(1, rounds + 1):
            for name, sample in (await one_round(ws, llm, n)).items():
                found.setdefault(name, []).append(sample)
        await ws.close()
    return found


def report(found: dict[str, list[dict]]) -> str:
    baselines = {name: median([s[name] for s in found["baseline (prompt via gateway)"]])
                 for name in ("stream", "return", "json", "outbound", "retrieval")}
    lines = ["| dialog | LLM call | n | added p50 ms | p95 ms | agent's own p50 ms |",
             "|---|---|---|---|---|---|"]
    for dialog, samples in found.items():
        for call in samples[0]:
            values = [sample[call] for sample in samples]
            own = ms(median(values) - sum(baselines[name] for name in BASELINE[call])) \
                if call in BASELINE else ""
            lines.append(f"| {dialog} | {call} | {len(values)} | {ms(median(values))} | "
                         f"{ms(percentile(values, 95))} | {own} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with openai_server_thread(Script(first=0.2, delay=0.01)) as llm:
        llm.reply = AgentReplies()
        with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "bench",
                        "TG_LLM": "openai", "TG_LOG_LEVEL": "WARNING"},
                   processors=PROCESSORS, startup_timeout=120.0) as stack:
            found = asyncio.run(measure(stack, llm, args.rounds))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nagent: one request at a time; LLM first token after 200 ms, then a word "
          f"every 10 ms; 2-core machine, load average {load}\n")
    print(report(found))


if __name__ == "__main__":
    main()
