"""What the integration modules that drive a gateway's websocket share."""
import asyncio

import pytest

DEADLINE = 30.0


@pytest.fixture
def frames_of(ws):
    """``await frames_of(frame)``: send one request frame on the module's ``ws``
    fixture (a gateway websocket); every frame answering it, up to the complete one."""
    async def frames_of(frame: dict) -> list[dict]:
        await ws.send_json(frame)
        got = []
        async with asyncio.timeout(DEADLINE):
            while not got or not got[-1]["complete"]:
                answer = await ws.receive_json()
                assert answer["id"] == frame["id"]
                got.append(answer)
        return got
    return frames_of
