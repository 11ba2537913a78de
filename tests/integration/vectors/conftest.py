"""The vector backends every test here runs against (each test once per backend):
Qdrant Edge (embedded), the Qdrant server backend against qdrant-client's local mode,
and against a real server when QDRANT_URL (+ QDRANT_API_KEY) is set."""
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from trustgraph.storage.vectors.lexical import Fts5Index
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.qdrant_server import QdrantServerBackend
from trustgraph.storage.vectors.qdrant_sparse import QdrantSparseIndex
from trustgraph.storage.vectors.store import VectorStore


@pytest.fixture
def shard_dir(tmp_path):
    """Edge's shard directories, in memory when the machine has a tmpfs: creating and
    closing a shard fsyncs (~0.2 s on this disk), which tells nothing about the
    contract and would make the suite ten times slower."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="tg-edge-", dir="/dev/shm"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["qdrant-edge", "qdrant-local", "qdrant-server"])
async def store(request):
    """Each backend with its lexical index: FTS5 beside Edge, sparse vectors in Qdrant."""
    if request.param == "qdrant-edge":
        shards = request.getfixturevalue("shard_dir")
        backend, lexical = EdgeBackend(shards), Fts5Index(shards / "lexical.sqlite")
    elif request.param == "qdrant-local":
        backend = QdrantServerBackend(AsyncQdrantClient(location=":memory:"))
        lexical = QdrantSparseIndex(backend.client)
    elif os.environ.get("QDRANT_URL"):
        backend = QdrantServerBackend.connect(os.environ["QDRANT_URL"],
                                              os.environ.get("QDRANT_API_KEY"))
        lexical = QdrantSparseIndex(backend.client)
    else:
        pytest.skip("set QDRANT_URL to run against a Qdrant server")
    store = VectorStore(backend, lexical)
    yield store
    await store.close()


@pytest.fixture
def scope(request):
    """A (user, collection) of this test's own (a real server outlives tests)."""
    return f"user-{random.getrandbits(40):x}", "default"
