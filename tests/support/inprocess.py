"""The backbone in one test process: text-completion processor + gateway on a real
broker, the LLM being a local OpenAI-format server."""
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from trustgraph.base import Processor
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub.embedded import free_port


@asynccontextmanager
async def inprocess_stack(broker_url: str, openai_base_url: str, token: str = "",
                          **gateway_settings) -> AsyncIterator[str]:
    """Yields the gateway's base URL, e.g. ``http://127.0.0.1:PORT/``."""
    # No config service here: both are pinned to flow default (TG_FLOWS).
    llm = Processor(spec_for("openai"), OpenAiSettings(
        pulsar_url=broker_url, openai_base_url=openai_base_url, tg_request_timeout=30,
        tg_flows=["default"]))
    await llm.start()
    gateway = Gateway(GatewaySettings(pulsar_url=broker_url, tg_gateway_token=token,
                                      tg_gateway_host="127.0.0.1",
                                      tg_gateway_port=free_port(), tg_gateway_keys=False,
                                      **{"tg_flows": ["default"], **gateway_settings}))
    url = await gateway.start()
    try:
        yield url
    finally:
        await gateway.stop()
        await llm.stop()
