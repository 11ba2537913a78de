import functools
import gc
import signal
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.openai_server import OpenAiServer
from tests.support.trustgraph_venv import TrustGraphTools, trustgraph_tools
from trustgraph.pubsub.embedded import EmbeddedBroker, free_port

# A suite started with SIGINT ignored (a background job of a shell without job
# control, as some CI runners start it) would hand that on to every command it starts,
# and the tests of Ctrl-C would fail: take Python's own handler back, which a child
# does not inherit.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``make test``'s workers (pytest-xdist, ``--dist loadfile``): a module's tests
    stay on one worker, so its module-scoped stack starts once, and the modules that
    share the session's ingestion stack (tests/e2e/conftest.py) stay together, so it
    starts once too."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByModule(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return INGESTION_GROUP if _shares_ingestion(module) else module

    return ByModule(config, log)


INGESTION_GROUP = "modules sharing ingestion_stack"


@functools.cache
def _shares_ingestion(module: str) -> bool:
    path = Path(__file__).parent.parent / module
    return path.suffix == ".py" and "ingestion_stack" in path.read_text(encoding="utf-8")


def pytest_collection_finish(session):
    """Every module imported by collection lives as long as the session: keep it out
    of the cyclic collector's reach, as processors do with their start-up heap
    (``trustgraph.base.freeze_startup_heap``); each ``Bus.close`` collects, and
    walking the whole session's heap there made a teardown take seconds."""
    gc.collect()
    gc.freeze()
