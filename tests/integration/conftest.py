"""What several integration modules share: a Bolt server (``arcadedb``), a ``bus`` on
the session's broker, a data
directory for processors that store (in memory when the machine has some; one per
test or per module), the provider contract suite's ``case``, and
``frames_of`` for the modules that drive a gateway's websocket, and ``ws`` / ``http``
for the modules whose ``rig`` fixture is a gateway (``rig.url``)."""
import asyncio
import shutil
import tempfile
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.support.arcadedb import ArcadeDb
from tests.support.local_llm import local_llm, local_llm_long  # noqa: F401  (fixtures)
from tests.support.provider_cases import case  # noqa: F401  (a fixture)
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port

DEADLINE = 30.0


@pytest.fixture(scope="session")
def arcadedb(tmp_path_factory):
    """A Bolt + Cypher server (ArcadeDB) for the Neo4j backend, once per session."""
    server = ArcadeDb(tmp_path_factory.mktemp("arcadedb"), free_port(), free_port()).start()
    yield server
    server.stop()


@pytest.fixture
async def bus(broker):
    bus = Bus(broker.url)
    yield bus
    await bus.close()


@pytest.fixture
def data_dir():
    yield from _memory_dir()


@pytest.fixture(scope="module")
def module_data_dir():
    """``data_dir`` for processors a whole module shares."""
    yield from _memory_dir()


def _memory_dir():
    """Edge shards fsync on creation (~0.2 s on disk): use memory when there is some."""
    path = Path(tempfile.mkdtemp(prefix="tg-data-",
                                 dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest_asyncio.fixture(loop_scope="module")
async def ws(rig):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(rig.url + "api/v1/socket") as ws:
            yield ws


@pytest_asyncio.fixture(loop_scope="module")
async def http():
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        yield http


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
