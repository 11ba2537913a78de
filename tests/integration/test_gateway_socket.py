"""The websocket gateway on a real broker, in front of the real text-completion
processor and the openai SDK talking to a local OpenAI-format server."""
import asyncio
from collections import defaultdict

import aiohttp
import pytest

from tests.support.inprocess import inprocess_stack
from tests.support.openai_server import expected_text

DEADLINE = 30.0


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def gateway(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url) as url:
        yield url


def request(id: str, prompt: str, streaming: bool = True, **envelope) -> dict:
    return {"id": id, "service": "text-completion",
            "request": {"prompt": prompt, "streaming": streaming}, **envelope}


async def collect(ws, ids) -> dict[str, list[dict]]:
    """Every frame, by id, until each of ``ids`` has had its complete frame."""
    frames, waiting = defaultdict(list), set(ids)
    async with asyncio.timeout(DEADLINE):
        while waiting:
            frame = await ws.receive_json()
            frames[frame["id"]].append(frame)
            if frame["complete"]:
                waiting.discard(frame["id"])
    return frames


async def answer(ws, frame: dict) -> list[dict]:
    await ws.send_json(frame)
    return (await collect(ws, [frame["id"]]))[frame["id"]]


def text_of(frames: list[dict]) -> str:
    return "".join(frame["response"]["response"] for frame in frames)


def assert_one_final_last(frames: list[dict]) -> None:
    assert [frame["complete"] for frame in frames] == [False] * (len(frames) - 1) + [True]


async def test_a_long_stream_arrives_whole_and_in_order(gateway, session):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        frames = await answer(ws, request("long", "[tokens=2000 delay=0]"))
    assert text_of(frames) == expected_text(2000)
    assert_one_final_last(frames)
    final = frames[-1]["response"]
    assert final["end_of_stream"] and final["response"] == ""
    assert (final["in_token"], final["out_token"], final["model"]) == (11, 2000, "fake-gpt")


async def test_non_streaming_is_one_frame(gateway, session):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        frames = await answer(ws, request("once", "[tokens=7]", streaming=False))
    assert len(frames) == 1 and frames[0]["complete"]
    assert frames[0]["response"]["response"] == expected_text(7)


async def test_concurrent_streams_on_one_socket_do_not_mix(gateway, session):
    # Each stream at 100 tokens/s, a fast real LLM's pace; all twenty at once.
    counts = {f"s{i}": 10 + 5 * i for i in range(20)}
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        for id, tokens in counts.items():
            await ws.send_json(request(id, f"[tokens={tokens} delay=0.01]"))
        frames = await collect(ws, counts)
    assert frames.keys() == counts.keys()
    for id, tokens in counts.items():
        assert text_of(frames[id]) == expected_text(tokens), id
        assert_one_final_last(frames[id])
        assert frames[id][-1]["response"]["out_token"] == tokens


async def test_provider_error_ends_only_its_own_stream(gateway, session):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        await ws.send_json(request("ok1", "[tokens=300 delay=0.001]"))
        await ws.send_json(request("bad", "[tokens=10 fail_after=3]"))
        await ws.send_json(request("ok2", "[tokens=200 delay=0.001]"))
        frames = await collect(ws, ["ok1", "bad", "ok2"])
        # A later request's answer arriving means nothing else was queued for "bad".
        later = await answer(ws, request("later", "[tokens=3]"))
        assert text_of(later) == expected_text(3)
    bad = frames["bad"]
    assert_one_final_last(bad)
    assert bad[-1]["response"]["error"]["type"] == "llm-error"
    assert bad[-1]["response"]["end_of_stream"] is True
    assert text_of(bad[:-1]) == expected_text(3)
    assert len(frames["bad"]) == len(bad)
    assert text_of(frames["ok1"]) == expected_text(300)
    assert text_of(frames["ok2"]) == expected_text(200)


async def test_closing_the_socket_closes_the_llm_stream(gateway, session, openai_server):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        await ws.send_json(request("slow", "[tokens=1000 delay=0.01]"))
        async with asyncio.timeout(DEADLINE):
            first = await ws.receive_json()
        assert first["id"] == "slow" and not first["complete"]
    await asyncio.wait_for(openai_server.disconnected.wait(), 1.0)


async def test_cancel_frame_closes_the_llm_stream(gateway, session, openai_server):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        await ws.send_json(request("slow", "[tokens=1000 delay=0.01]"))
        async with asyncio.timeout(DEADLINE):
            await ws.receive_json()
        await ws.send_json({"type": "cancel", "id": "slow"})
        await asyncio.wait_for(openai_server.disconnected.wait(), 1.0)
        await ws.send_json({"type": "cancel", "id": "never-sent"})  # ignored
        await ws.send_json({"type": "cancel", "id": ["not", "a", "string"]})  # ignored
        # The socket still works (frames "slow" sent before the cancel may still
        # be in the receive buffer; collect() files them under their own id).
        again = await answer(ws, request("after", "[tokens=4]"))
        assert text_of(again) == expected_text(4)


@pytest.mark.parametrize("frame, expected_id, error_type, named", [
    ("not json", None, "bad-request", "not valid JSON"),
    ("[1, 2]", None, "bad-request", "JSON object"),
    ("[" * 100_000, None, "bad-request", "not valid JSON"),
    ({"service": "text-completion", "request": {"prompt": "p"}}, None, "bad-request", "id"),
    ({"id": "r", "service": "text-completion"}, "r", "bad-request", "request"),
    ({"id": "r", "request": {"prompt": "p"}}, "r", "bad-request", "service"),
    ({"id": "r", "service": "nope", "request": {}}, "r", "unknown-service", "nope"),
    ({"id": "r", "service": "text-completion", "flow": "other", "request": {"prompt": "p"}},
     "r", "unknown-flow", "other"),
    ({"id": "r", "service": "text-completion", "request": {}}, "r", "bad-request",
     "request.prompt"),
    ({"id": "r", "service": "text-completion", "request": {"prompt": ["x"]}}, "r",
     "bad-request", "request.prompt"),
    ({"id": "r", "service": "text-completion", "request": "text"}, "r", "bad-request",
     "request"),
    ({"id": "r", "type": "subscribe"}, "r", "bad-request", "subscribe"),
])
async def test_a_bad_frame_gets_an_error_and_the_socket_keeps_working(
        gateway, session, frame, expected_id, error_type, named):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        if isinstance(frame, str):
            await ws.send_str(frame)
        else:
            await ws.send_json(frame)
        async with asyncio.timeout(DEADLINE):
            error = await ws.receive_json()
        assert error["id"] == expected_id and error["complete"] is True
        assert error["error"]["type"] == error_type
        assert named in error["error"]["message"]
        assert text_of(await answer(ws, request("good", "[tokens=5]"))) == expected_text(5)


async def test_envelope_user_and_hyphenated_fields_are_accepted(gateway, session):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        frames = await answer(ws, {"id": "u", "service": "text-completion", "flow": "default",
                                   "user": "alice", "request": {"prompt": "[tokens=2]"}})
    assert frames[0]["response"]["response"] == expected_text(2)


async def test_duplicate_and_too_many_in_flight(broker, openai_server, session):
    async with inprocess_stack(broker.url, openai_server.base_url,
                               tg_gateway_max_inflight=2) as gateway:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            await ws.send_json(request("a", "[tokens=1000 delay=0.01]"))
            await ws.send_json(request("b", "[tokens=1000 delay=0.01]"))
            await ws.send_json(request("a", "[tokens=1]"))
            await ws.send_json(request("c", "[tokens=1]"))
            errors = {}
            async with asyncio.timeout(DEADLINE):
                while len(errors) < 2:
                    frame = await ws.receive_json()
                    if "error" in frame:
                        errors[frame["error"]["type"]] = frame["id"]
            assert errors == {"duplicate-id": "a", "too-many-requests": "c"}
            await ws.send_json({"type": "cancel", "id": "a"})
            await ws.send_json({"type": "cancel", "id": "b"})
            frames = await answer(ws, request("d", "[tokens=3]"))
            assert text_of(frames) == expected_text(3)


async def test_oversize_frame_is_refused_and_the_socket_stays_open(broker, openai_server,
                                                                   session):
    async with inprocess_stack(broker.url, openai_server.base_url,
                               tg_gateway_max_frame=1000) as gateway:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            error = (await answer(ws, request("big", "x" * 2000)))[0]
            assert error["error"]["type"] == "too-large" and error["complete"]
            frames = await answer(ws, request("small", "[tokens=3]"))
            assert text_of(frames) == expected_text(3)


async def test_silent_service_times_out(broker, openai_server, session):
    async with inprocess_stack(broker.url, openai_server.base_url,
                               tg_request_timeout=0.5) as gateway:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            frames = await answer(ws, request("quiet", "[tokens=2 first=5]"))
    assert frames[-1]["error"]["type"] == "timeout" and frames[-1]["complete"]


# Auth: PROTOCOL §1.

async def test_open_gateway_answers_any_auth_frame(gateway, session):
    async with session.ws_connect(gateway + "api/v1/socket") as ws:
        await ws.send_json({"type": "auth", "token": "whatever"})
        async with asyncio.timeout(DEADLINE):
            assert await ws.receive_json() == {"type": "auth-ok", "default_workspace": "default"}


@pytest.fixture
async def guarded(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url, token="s3cret") as url:
        yield url


async def test_token_required_then_auth_frame(guarded, session):
    async with session.ws_connect(guarded + "api/v1/socket") as ws:
        refused = (await answer(ws, request("r1", "[tokens=2]")))[0]
        assert refused["error"]["type"] == "auth-required"
        await ws.send_json({"type": "auth", "token": "wrong"})
        async with asyncio.timeout(DEADLINE):
            assert await ws.receive_json() == {"type": "auth-failed", "error": "auth failure"}
        refused = (await answer(ws, request("r2", "[tokens=2]")))[0]
        assert refused["error"]["type"] == "auth-failed"
        await ws.send_json({"type": "auth", "token": "s3cret"})
        async with asyncio.timeout(DEADLINE):
            assert (await ws.receive_json())["type"] == "auth-ok"
        assert text_of(await answer(ws, request("r3", "[tokens=2]"))) == expected_text(2)


@pytest.mark.parametrize("how", ["query", "bearer"])
async def test_token_when_opening_the_socket(guarded, session, how):
    options = {"params": {"token": "s3cret"}} if how == "query" else {
        "headers": {"Authorization": "Bearer s3cret"}}
    async with session.ws_connect(guarded + "api/v1/socket", **options) as ws:
        assert text_of(await answer(ws, request("r", "[tokens=2]"))) == expected_text(2)


async def test_wrong_token_when_opening_the_socket(guarded, session):
    async with session.ws_connect(guarded + "api/v1/socket", params={"token": "nope"}) as ws:
        refused = (await answer(ws, request("r", "[tokens=2]")))[0]
        assert refused["error"]["type"] == "auth-failed"
