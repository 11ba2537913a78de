"""Which stores a configuration means: the embedded ones in ``tg_data_dir`` unless a
server is named (DESIGN §1, §7)."""
from pathlib import Path

from .settings import StoreSettings
from .triples.store import TriplesStore
from .vectors.store import VectorStore


async def open_triples_store(settings: StoreSettings) -> TriplesStore:
    if settings.neo4j_uri:
        from .triples.neo4j import Neo4jTriplesStore
        return await Neo4jTriplesStore.open(settings.neo4j_uri, settings.neo4j_user,
                                            settings.neo4j_password, settings.neo4j_database)
    from .triples.sqlite import SqliteTriplesStore
    return await SqliteTriplesStore.open(Path(settings.tg_data_dir) / "triples.sqlite")


def open_vector_store(settings: StoreSettings) -> VectorStore:
    """In embedded mode exactly one process may open it: that process owns the shards."""
    if settings.qdrant_url:
        from .vectors.qdrant_server import QdrantServerBackend
        from .vectors.qdrant_sparse import QdrantSparseIndex
        backend = QdrantServerBackend.connect(settings.qdrant_url, settings.qdrant_api_key)
        return VectorStore(backend, QdrantSparseIndex(backend.client))
    from .vectors.lexical import Fts5Index
    from .vectors.qdrant_edge import EdgeBackend
    data = Path(settings.tg_data_dir)
    return VectorStore(EdgeBackend(data / "vectors"), Fts5Index(data / "lexical.sqlite"))
