"""The gateway as its own process (``main``): says where it listens and that it is
open, serves, and on SIGTERM closes its websockets and cancels their requests."""
import asyncio
import signal
import sys

import aiohttp

from trustgraph.base import Processor
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub.embedded import free_port

DEADLINE = 30.0
MAIN = "from trustgraph.gateway.app import main; main()"


async def wait_for_line(lines: asyncio.StreamReader, text: str, seen: list[str]) -> None:
    async with asyncio.timeout(DEADLINE):
        while not any(text in line for line in seen):
            line = await lines.readline()
            assert line, f"gateway exited early: {seen}"
            seen.append(line.decode())


async def test_main_serves_then_stops_cleanly_on_sigterm(broker, openai_server):
    llm = Processor(spec_for("openai"), OpenAiSettings(
        pulsar_url=broker.url, openai_base_url=openai_server.base_url, tg_flows=["default"]))
    await llm.start()
    port = free_port()
    gateway = await asyncio.create_subprocess_exec(
        sys.executable, "-c", MAIN, "--pulsar-url", broker.url,
        "--tg-gateway-port", str(port), "--no-tg-gateway-keys",  # no config service here
        "--tg-flows", "default",
        stderr=asyncio.subprocess.PIPE)
    seen: list[str] = []
    try:
        await wait_for_line(gateway.stderr, f"listening on http://127.0.0.1:{port}/", seen)
        await wait_for_line(gateway.stderr, "gateway is OPEN", seen)
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://127.0.0.1:{port}/api/v1/socket") as ws:
                await ws.send_json({"id": "s", "service": "text-completion", "request": {
                    "prompt": "[tokens=1000 delay=0.01]", "streaming": True}})
                async with asyncio.timeout(DEADLINE):
                    assert (await ws.receive_json())["complete"] is False
                gateway.send_signal(signal.SIGTERM)
                async with asyncio.timeout(DEADLINE):
                    while (message := await ws.receive()).type == aiohttp.WSMsgType.TEXT:
                        pass
                assert message.type == aiohttp.WSMsgType.CLOSE
                assert message.data == aiohttp.WSCloseCode.GOING_AWAY
        await asyncio.wait_for(openai_server.disconnected.wait(), DEADLINE)
        async with asyncio.timeout(DEADLINE):
            seen.append((await gateway.stderr.read()).decode())  # drain the log to the end
            assert await gateway.wait() == 0, "".join(seen)[-3000:]
    finally:
        if gateway.returncode is None:
            gateway.kill()
            await gateway.wait()
        await llm.stop()
