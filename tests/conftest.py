import gc

import pytest
import pytest_asyncio

from tests.support.openai_server import OpenAiServer
from tests.support.trustgraph_venv import TrustGraphTools, trustgraph_tools
from trustgraph.pubsub.embedded import EmbeddedBroker, free_port


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A real pulsar-lite broker for the whole test session."""
    broker = EmbeddedBroker(tmp_path_factory.mktemp("broker"), port=free_port())
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def trustgraph() -> TrustGraphTools:
    """TrustGraph's own published client and CLI, in a venv of their own (made once,
    then reused: tests/support/trustgraph_venv.py)."""
    return trustgraph_tools()


@pytest.fixture
async def openai_server():
    server = await OpenAiServer().start()
    yield server
    await server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def llm():
    """A scripted OpenAI-format server shared by a test module's tests (which set
    its script per test)."""
    server = await OpenAiServer().start()
    yield server
    await server.stop()


def pytest_collection_finish(session):
    """Every module imported by collection lives as long as the session: keep it out
    of the cyclic collector's reach, as processors do with their start-up heap
    (``trustgraph.base.freeze_startup_heap``); each ``Bus.close`` collects, and
    walking the whole session's heap there made a teardown take seconds."""
    gc.collect()
    gc.freeze()
