"""The vector store a configuration names: Qdrant Edge (and an FTS5 lexical index) in
``tg_data_dir`` unless a Qdrant server is named (DESIGN §1, §7)."""
from pathlib import Path

from ..settings import StoreSettings
from .store import VectorStore


def open_vector_store(settings: StoreSettings) -> VectorStore:
    """In embedded mode exactly one process may open it: that process owns the shards."""
    if settings.qdrant_url:
        from .qdrant_server import QdrantServerBackend
        from .qdrant_sparse import QdrantSparseIndex
        backend = QdrantServerBackend.connect(settings.qdrant_url, settings.qdrant_api_key)
        return VectorStore(backend, QdrantSparseIndex(backend.client))
    from .lexical import Fts5Index
    from .qdrant_edge import EdgeBackend
    data = Path(settings.tg_data_dir)
    return VectorStore(EdgeBackend(data / "vectors"), Fts5Index(data / "lexical.sqlite"))
