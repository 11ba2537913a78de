"""Triples stores: SQLite embedded by default, Neo4j (any Bolt + Cypher server)
when ``NEO4J_URI`` is set. store.py is the interface; ../stores.py picks one."""
