"""The triples store a configuration names: SQLite in ``tg_data_dir`` unless a Neo4j
server is named (DESIGN §1, §7)."""
from pathlib import Path

from ..settings import StoreSettings
from .store import TriplesStore


async def open_triples_store(settings: StoreSettings) -> TriplesStore:
    if settings.neo4j_uri:
        from .neo4j import Neo4jTriplesStore
        return await Neo4jTriplesStore.open(settings.neo4j_uri, settings.neo4j_user,
                                            settings.neo4j_password, settings.neo4j_database)
    from .sqlite import SqliteTriplesStore
    return await SqliteTriplesStore.open(Path(settings.tg_data_dir) / "triples.sqlite")
