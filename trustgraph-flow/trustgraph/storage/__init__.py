"""Stores behind small async interfaces: triples (SQLite / Neo4j) and vectors
(Qdrant Edge / Qdrant server), every item and query scoped by user and collection."""
