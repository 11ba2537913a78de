"""One question is one trace (docs/observability.md): the gateway and the real
text-completion processor on a real broker, both traced in this process, their
spans written to a trace store and read back as the gateway serves them.

The websocket's final frame carries the trace id, HTTP answers a ``traceparent``
header; the trace's spans are parented across the broker (the gateway's request
span → its call → text-completion's span), and carry who asked, the flow, the
model, token counts and the first token's time; a cancelled request says so; with
tracing off, nothing of it appears. A client's ``traceparent`` is continued, and its
sampled flag decides over the gateway's own sampling; a question sampled out is
given no trace id."""
import asyncio

import aiohttp
import pytest

from tests.support.inprocess import inprocess_stack
from tests.support.openai_server import expected_text
from tests.support.traces import by_name, children, traced
from tests.support.waiting import eventually
from trustgraph import tracing
from trustgraph.api import AsyncTrustGraph

DEADLINE = 30.0


@pytest.fixture
def traces(tmp_path):
    with traced(tmp_path) as traces:
        yield traces


@pytest.fixture
async def gateway(traces, broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url) as url:
        yield url


async def ask(url: str, request: dict, traceparent: str | None = None) -> list[dict]:
    frames = []
    frame = {"id": "q", "service": "text-completion", "request": request}
    if traceparent is not None:
        frame["traceparent"] = traceparent
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url + "api/v1/socket") as ws:
            await ws.send_json(frame)
            async with asyncio.timeout(DEADLINE):
                while not frames or not frames[-1]["complete"]:
                    frames.append(await ws.receive_json())
    return frames


async def test_a_streamed_answer_is_one_trace_parented_across_the_broker(gateway, traces):
    frames = await ask(gateway, {"prompt": "[tokens=20]", "streaming": True})
    assert "".join(f["response"]["response"] for f in frames) == expected_text(20)
    trace_id = frames[-1]["trace_id"]
    assert all("trace_id" not in frame for frame in frames[:-1])

    spans = traces.spans(trace_id)
    [root] = [span for span in spans if span["parent_id"] is None]
    assert (root["name"], root["kind"], root["service"]) == \
        ("websocket text-completion", "SERVER", "gateway")
    [call] = children(spans, root)
    assert (call["name"], call["kind"]) == ("text-completion", "CLIENT")
    [served] = children(spans, call)
    assert (served["name"], served["kind"], served["service"]) == \
        ("text-completion", "SERVER", "text-completion-openai")

    asked = root["attributes"]
    assert (asked["tg.service"], asked["tg.flow"], asked["tg.user"]) == \
        ("text-completion", "default", "trustgraph")
    assert 0 < asked["tg.time_to_first_response_ms"] <= \
        asked["tg.time_to_first_token_ms"] <= root["duration_ms"]
    llm = served["attributes"]
    assert llm["tg.request_id"] == call["attributes"]["tg.request_id"]
    assert (llm["openinference.span.kind"], llm["gen_ai.operation.name"],
            llm["gen_ai.provider.name"]) == ("LLM", "chat", "openai")
    assert (llm["gen_ai.response.model"], llm["llm.model_name"]) == ("fake-gpt", "fake-gpt")
    assert (llm["gen_ai.usage.output_tokens"], llm["llm.token_count.completion"]) == (20, 20)
    assert llm["llm.token_count.total"] == llm["gen_ai.usage.input_tokens"] + 20
    assert llm["input.value"] == "[tokens=20]" and "output.value" not in llm  # streamed
    assert 0 < llm["tg.time_to_first_token_ms"] <= served["duration_ms"]
    # Parents start before and end after their children (one process's clock).
    assert root["start_ms"] <= call["start_ms"] <= served["start_ms"]


async def test_rest_answers_carry_a_traceparent_header_of_their_trace(gateway, traces):
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway + "api/v1/flow/default/service/text-completion",
                                json={"prompt": "[tokens=3]"}) as response:
            assert (await response.json())["response"] == expected_text(3)
            header = response.headers["traceparent"]
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    spans = by_name(traces.spans(trace_id))
    [root] = spans["POST /api/v1/flow/{flow}/service/{kind}"]
    assert root["span_id"] == span_id and root["attributes"]["http.response.status_code"] == 200
    [served] = [s for s in spans["text-completion"] if s["kind"] == "SERVER"]
    assert served["attributes"]["output.value"] == expected_text(3)  # collected anyway


async def test_a_streamed_http_answer_carries_the_header_too(gateway, traces):
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway + "api/v1/flow/default/service/text-completion",
                                json={"prompt": "[tokens=4]", "streaming": True}) as response:
            assert response.content_type == "application/x-ndjson"
            lines = [line async for line in response.content if line.strip()]
            header = response.headers["traceparent"]
    assert len(lines) >= 2  # streamed: the headers went out before the answer was done
    spans = by_name(traces.spans(header.split("-")[1]))
    assert spans["POST /api/v1/flow/{flow}/service/{kind}"][0]["span_id"] == \
        header.split("-")[2]


async def test_the_openai_api_is_traced_as_the_websocket_is(gateway, traces):
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway + "v1/chat/completions", json={
                "model": "llm", "stream": True,
                "messages": [{"role": "user", "content": "[tokens=3]"}]}) as response:
            assert response.status == 200
            await response.read()
            header = response.headers["traceparent"]
    spans = await traces.settled(header.split("-")[1], {"text-completion"})
    [root] = [s for s in spans["spans"] if s["parent_id"] is None]
    assert (root["name"], root["attributes"]["tg.service"]) == \
        ("POST /v1/chat/completions", "text-completion")
    assert root["attributes"]["tg.time_to_first_token_ms"] > 0


async def test_a_cancelled_request_says_so_on_its_spans(gateway, traces, openai_server):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            await ws.send_json({"id": "slow", "service": "text-completion", "request": {
                "prompt": "[tokens=500 delay=0.05]", "streaming": True}})
            await ws.receive_json()  # it has started
            await ws.send_json({"type": "cancel", "id": "slow"})

    def cancelled() -> bool:
        recent = traces.reader.recent(5)
        return bool(recent) and any(
            span["attributes"].get("tg.cancelled") and span["kind"] == "SERVER"
            and span["service"] == "text-completion-openai"
            for span in traces.spans(recent[0]["trace_id"]))
    await eventually(cancelled, "the text-completion span to say it was cancelled",
                     timeout=DEADLINE)


async def test_with_tracing_off_nothing_is_traced(broker, openai_server, tmp_path):
    async with inprocess_stack(broker.url, openai_server.base_url) as url:
        frames = await ask(url, {"prompt": "[tokens=2]", "streaming": True})
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "api/v1/flow/default/service/text-completion",
                                    json={"prompt": "[tokens=2]"}) as response:
                assert response.status == 200 and "traceparent" not in response.headers
    assert "trace_id" not in frames[-1]



CLIENT_TRACE, CLIENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


async def test_a_question_continues_the_trace_its_client_sent(gateway, traces):
    frames = await ask(gateway, {"prompt": "[tokens=2]", "streaming": True},
                       traceparent=f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
    assert frames[-1]["trace_id"] == CLIENT_TRACE
    trace = await traces.settled(CLIENT_TRACE, {"text-completion"})
    # Kept here rooted at the gateway's span: the client's own span is the client's.
    [root] = [s for s in trace["spans"] if s["parent_id"] is None]
    assert root["name"] == "websocket text-completion"
    assert root["attributes"]["tg.client_span"] == CLIENT_SPAN
    async with aiohttp.ClientSession() as session:
        async with session.post(gateway + "api/v1/flow/default/service/text-completion",
                                json={"prompt": "[tokens=2]"},
                                headers={"traceparent": f"00-{'1' * 32}-{CLIENT_SPAN}-01"}
                                ) as response:
            assert response.headers["traceparent"].split("-")[1] == "1" * 32


async def test_sampled_out_questions_carry_no_trace_id_and_a_client_can_ask_for_one(
        broker, openai_server, tmp_path):
    with traced(tmp_path, sample=0.0) as traces:
        async with inprocess_stack(broker.url, openai_server.base_url) as url:
            sampled_out = await ask(url, {"prompt": "[tokens=2]", "streaming": True})
            declined = await ask(url, {"prompt": "[tokens=2]", "streaming": True},
                                 traceparent=f"00-{'2' * 32}-{CLIENT_SPAN}-00")
            wanted = await ask(url, {"prompt": "[tokens=2]", "streaming": True},
                               traceparent=f"00-{'3' * 32}-{CLIENT_SPAN}-01")
            malformed = await ask(url, {"prompt": "[tokens=2]", "streaming": True},
                                  traceparent="not a traceparent")
            async with aiohttp.ClientSession() as session:
                async with session.post(
                        url + "api/v1/flow/default/service/text-completion",
                        json={"prompt": "[tokens=2]"}) as response:
                    assert response.status == 200 and "traceparent" not in response.headers
            async with AsyncTrustGraph(url, traced=True) as client:  # the tg-invoke-* way
                assert await client.text_completion("", "[tokens=2]") == expected_text(2)
        for frames in (sampled_out, declined, malformed):
            assert "".join(f["response"]["response"] for f in frames) == expected_text(2)
            assert "trace_id" not in frames[-1]  # only ids a client can read back
        assert wanted[-1]["trace_id"] == "3" * 32
        await traces.settled("3" * 32, {"text-completion"})

        def kept() -> list[str]:
            tracing.flush()
            return [t["trace_id"] for t in traces.reader.recent(10)]
        both = await eventually(lambda: kept() if len(kept()) == 2 else None,
                                "the client's trace too")
        assert "3" * 32 in both


async def test_a_traceparent_that_is_not_text_is_refused(gateway):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            await ws.send_json({"id": "q", "service": "text-completion", "traceparent": 7,
                                "request": {"prompt": "[tokens=2]"}})
            frame = await asyncio.wait_for(ws.receive_json(), DEADLINE)
    assert frame["error"]["type"] == "bad-request" and "traceparent" in frame["error"]["message"]
