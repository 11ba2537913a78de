"""Which store backends to use: the embedded ones in ``tg_data_dir`` (a setting every
process has) unless a server is named (DESIGN §7). Mix into a processor's settings
model."""
from trustgraph.base.settings import Settings


class StoreSettings(Settings):
    neo4j_uri: str | None = None  # absent: SQLite triples in the data dir
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    neo4j_database: str | None = None
    qdrant_url: str | None = None  # absent: Qdrant Edge in the data dir
    qdrant_api_key: str | None = None
