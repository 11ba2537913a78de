"""The distributed triples store: Neo4j (or any Bolt + Cypher server) through the
official async driver.

Graph shape: every term is a ``(:Term {key, user, collection, t, v})`` node whose
``key`` is the JSON of ``[user, collection, t, v]``, unique per scope, so one indexed
equality finds an entity inside its scope and nowhere else. Every (triple, document,
chunk) is one ``[:Rel {user, collection, p, document, chunk}]`` relationship: adding it
again MERGEs onto the same one, removing a document deletes its relationships, and
reads return DISTINCT triples.

Cypher is never assembled from input: labels, relationship types and property names
are fixed; every value is a parameter. Writes are UNWIND batches inside
``execute_write``, which retries transient failures (deadlocks, leader changes).
It also runs on ArcadeDB's Bolt plugin; see docs/storage.md for the differences.
"""
import json
from collections.abc import Iterable, Sequence
from typing import Any, Self

from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import ClientError

from trustgraph.schema import RDFS_LABEL, Term, Triple

from .store import EdgePage, ProvenanceRow, check_addable, iris, make_triple

BATCH = 500  # triples per write transaction

SCHEMA = [
    # Enforced by Neo4j (and what makes concurrent MERGEs safe there); ArcadeDB
    # accepts it without creating anything, hence the plain index next.
    "CREATE CONSTRAINT tg_term_key IF NOT EXISTS FOR (n:Term) REQUIRE n.key IS UNIQUE",
    "CREATE INDEX tg_term_key_index IF NOT EXISTS FOR (n:Term) ON (n.key)",
    "CREATE INDEX tg_term_scope IF NOT EXISTS FOR (n:Term) ON (n.user, n.collection)",
    "CREATE INDEX tg_rel_document IF NOT EXISTS FOR ()-[r:Rel]-()"
    " ON (r.user, r.collection, r.document)",
    "CREATE INDEX tg_rel_chunk IF NOT EXISTS FOR ()-[r:Rel]-() ON (r.chunk)",
    "CREATE INDEX tg_graph_version IF NOT EXISTS FOR (n:GraphVersion) ON (n.user, n.collection)",
]

ADD = """
UNWIND $rows AS row
MERGE (s:Term {key: row.sk})
  ON CREATE SET s.user = $user, s.collection = $collection, s.t = 'i', s.v = row.s
MERGE (o:Term {key: row.ok})
  ON CREATE SET o.user = $user, o.collection = $collection, o.t = row.ot, o.v = row.o
MERGE (s)-[:Rel {user: $user, collection: $collection, p: row.p,
                 document: row.document, chunk: row.chunk}]->(o)
"""

PROVENANCE_COUNT = """
MATCH (:Term {user: $user, collection: $collection})-[r:Rel]->(:Term)
RETURN count(r) AS n
"""

# Offsets into a stable order, as EDGES: each page skips what the ones before read.
PROVENANCE_PAGE = """
MATCH (a:Term {user: $user, collection: $collection})-[r:Rel]->(b:Term)
RETURN a.v AS s, r.p AS p, b.v AS o, b.t AS ot, r.document AS document, r.chunk AS chunk,
       a.key AS ak, b.key AS bk
ORDER BY ak, p, bk, document, chunk SKIP $after LIMIT $limit
"""

NEIGHBOURS = """
UNWIND $keys AS key
MATCH (n:Term {key: key})-[r:Rel]-(:Term)
WITH key, collect(DISTINCT {s: startNode(r).v, p: r.p, o: endNode(r).v,
                            ot: endNode(r).t})[..$limit] AS rows
UNWIND rows AS row
RETURN DISTINCT row.s AS s, row.p AS p, row.o AS o, row.ot AS ot
"""

LABELS = """
UNWIND $keys AS key
MATCH (s:Term {key: key})-[:Rel {p: $label}]->(o:Term {t: 'l'})
RETURN s.v AS entity, min(o.v) AS label
"""

# One relationship per (triple, document, chunk): ordered, the first is the least pair.
PROVENANCE = """
UNWIND $rows AS row
MATCH (:Term {key: row.sk})-[r:Rel {p: row.p}]->(:Term {key: row.ok})
WITH row.n AS n, r.document AS document, r.chunk AS chunk,
     CASE WHEN r.chunk IN $prefer THEN 0 ELSE 1 END AS preferred
ORDER BY n, preferred, document, chunk
WITH n, collect([document, chunk])[0] AS first
RETURN n, first[0] AS document, first[1] AS chunk
"""

CHUNK_TRIPLES = """
UNWIND $chunks AS chunk
MATCH (s:Term)-[r:Rel {chunk: chunk}]->(o:Term)
WHERE r.user = $user AND r.collection = $collection
RETURN DISTINCT chunk, s.v AS s, r.p AS p, o.v AS o, o.t AS ot
ORDER BY chunk, s, p, o, ot
"""

COUNT = """
MATCH (s:Term {user: $user, collection: $collection})-[r:Rel]->(o:Term)
RETURN count(DISTINCT [s.v, r.p, o.t, o.v]) AS n
"""

DOCUMENT_TERMS = """
MATCH (s:Term)-[:Rel {user: $user, collection: $collection, document: $document}]->(o:Term)
RETURN collect(DISTINCT s.key) + collect(DISTINCT o.key) AS keys
"""

DELETE_DOCUMENT_RELS = """
MATCH (:Term)-[r:Rel {user: $user, collection: $collection, document: $document}]->(:Term)
DELETE r
"""

DELETE_ORPHANS = """
UNWIND $keys AS key
MATCH (n:Term {key: key})
WHERE NOT EXISTS { (n)-[:Rel]-() }
DELETE n
"""

DELETE_SCOPE_BATCH = """
MATCH (n:Term {user: $user, collection: $collection})
WITH n LIMIT $batch
DETACH DELETE n
RETURN count(*) AS n
"""


# The scope's graph version lives on a node of its own label, which deleting the
# collection's terms leaves alone: a re-filled collection never repeats a version.
# Bumped in the write's own transaction (per batch, even when the batch only adds
# provenance: a cache derived from the graph is then rebuilt once more, harmlessly).
BUMP_VERSION = """
MERGE (v:GraphVersion {user: $user, collection: $collection})
SET v.version = coalesce(v.version, 0) + 1
"""

VERSION = """
MATCH (v:GraphVersion {user: $user, collection: $collection}) RETURN v.version AS version
"""

# Pages are offsets into a stable order: Neo4j has no dense ids to key pages on.
EDGES = """
MATCH (a:Term {user: $user, collection: $collection})-[r:Rel]->(b:Term {t: 'i'})
WHERE a.key <> b.key
WITH a.v AS subject, b.v AS object, count(DISTINCT r.p) AS weight
RETURN subject, object, weight ORDER BY subject, object SKIP $after LIMIT $limit
"""


def term_key(user: str, collection: str, term: Term) -> str:
    return json.dumps([user, collection, term.t, term.value])


async def _bumped(tx: AsyncManagedTransaction, query: str, params: dict[str, Any]) -> None:
    """``query``, then the scope's version bumped, in one transaction."""
    await _fetch(tx, query, params)
    await _fetch(tx, BUMP_VERSION, {"user": params["user"],
                                    "collection": params["collection"]})


async def _fetch(tx: AsyncManagedTransaction, query: str, params: dict[str, Any]) -> list:
    result = await tx.run(query, params)
    return [record async for record in result]


class Neo4jTriplesStore:
    def __init__(self, driver: AsyncDriver, database: str | None = None):
        self._driver = driver
        self._database = database

    @classmethod
    async def open(cls, uri: str, user: str, password: str,
                   database: str | None = None) -> Self:
        driver = AsyncGraphDatabase.driver(uri, auth=(user, password))
        store = cls(driver, database)
        try:
            await driver.verify_connectivity()
            await store._create_schema()
        except BaseException:
            await driver.close()
            raise
        return store

    async def close(self) -> None:
        await self._driver.close()

    async def _create_schema(self) -> None:
        for statement in SCHEMA:
            try:
                await self._write(lambda tx, statement=statement: _fetch(tx, statement, {}))
            except ClientError:
                pass  # Neo4j: the constraint already indexes n.key

    async def _read(self, query: str, **params: Any) -> list:
        async with self._driver.session(database=self._database) as session:
            return await session.execute_read(_fetch, query, params)

    async def _write(self, work) -> Any:
        async with self._driver.session(database=self._database) as session:
            return await session.execute_write(work)

    # -- writes ------------------------------------------------------------------

    async def add(self, user: str, collection: str, triples: Iterable[Triple], *,
                  document: str, chunk: str = "") -> None:
        rows = []
        for t in triples:
            check_addable(t)
            rows.append((t.s.value, t.p.value, t.o.value, t.o.is_iri, document, chunk))
        await self.add_provenance(user, collection, rows)

    async def add_provenance(self, user: str, collection: str,
                             rows: Sequence[ProvenanceRow]) -> None:
        # term_key's, without a Term per value
        params = [{"sk": json.dumps([user, collection, "i", s]), "s": s, "p": p,
                   "ok": json.dumps([user, collection, "i" if o_iri else "l", o]), "o": o,
                   "ot": "i" if o_iri else "l", "document": document, "chunk": chunk}
                  for s, p, o, o_iri, document, chunk in rows]
        for start in range(0, len(params), BATCH):
            batch = {"rows": params[start:start + BATCH], "user": user,
                     "collection": collection}
            await self._write(lambda tx, batch=batch: _bumped(tx, ADD, batch))

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        params = {"user": user, "collection": collection, "document": document}

        async def remove(tx: AsyncManagedTransaction) -> None:
            [record] = await _fetch(tx, DOCUMENT_TERMS, params)
            await _fetch(tx, DELETE_DOCUMENT_RELS, params)
            await _fetch(tx, DELETE_ORPHANS, {"keys": list(set(record["keys"]))})
            if record["keys"]:
                await _fetch(tx, BUMP_VERSION, params)
        await self._write(remove)

    async def delete_collection(self, user: str, collection: str, batch: int = 10000) -> int:
        params = {"user": user, "collection": collection, "batch": batch}
        held = await self.count(user, collection)
        while True:  # in batches: one huge transaction could exhaust the server's memory
            [record] = await self._write(lambda tx: _fetch(tx, DELETE_SCOPE_BATCH, params))
            if record["n"] == 0:
                await self._write(lambda tx: _fetch(tx, BUMP_VERSION, params))
                return held

    # -- reads -------------------------------------------------------------------

    async def query(self, user: str, collection: str, s: Term | None = None,
                    p: Term | None = None, o: Term | None = None,
                    limit: int = 10000) -> list[Triple]:
        if (s and not s.is_iri) or (p and not p.is_iri):
            return []  # never stored
        # Assembled from the fixed fragments below only; every value is a parameter.
        subject = "{key: $s}" if s else "{user: $user, collection: $collection}"
        predicate = " {p: $p}" if p else ""
        obj = " {key: $o}" if o else ""
        query = (f"MATCH (s:Term {subject})-[r:Rel{predicate}]->(o:Term{obj})"
                 " WHERE r.user = $user AND r.collection = $collection"
                 " RETURN DISTINCT s.v AS s, r.p AS p, o.v AS o, o.t AS ot LIMIT $limit")
        records = await self._read(
            query, user=user, collection=collection, limit=limit, p=p.i if p else None,
            s=term_key(user, collection, s) if s else None,
            o=term_key(user, collection, o) if o else None)
        return [_triple(record) for record in records]

    async def neighbours(self, user: str, collection: str, entities: Iterable[Term],
                         limit_per_entity: int = 30, limit: int | None = None
                         ) -> list[Triple]:
        keys = [term_key(user, collection, Term.iri(e)) for e in iris(entities)]
        records = await self._read(NEIGHBOURS, keys=keys, limit=limit_per_entity)
        return [_triple(record) for record in records[:limit]]

    async def labels(self, user: str, collection: str,
                     entities: Iterable[Term]) -> dict[Term, str]:
        keys = [term_key(user, collection, Term.iri(e)) for e in iris(entities)]
        records = await self._read(LABELS, keys=keys, label=RDFS_LABEL)
        return {Term.iri(r["entity"]): r["label"] for r in records}

    async def provenance(self, user: str, collection: str, triples: Iterable[Triple],
                         prefer: Sequence[str] = ()) -> dict[Triple, tuple[str, str]]:
        triples = [t for t in triples if t.s.is_iri and t.p.is_iri]  # others never stored
        rows = [{"n": n, "sk": term_key(user, collection, t.s), "p": t.p.i,
                 "ok": term_key(user, collection, t.o)} for n, t in enumerate(triples)]
        records = await self._read(PROVENANCE, rows=rows, prefer=list(prefer))
        return {triples[r["n"]]: (r["document"], r["chunk"]) for r in records}

    async def chunk_triples(self, user: str, collection: str,
                            chunks: Iterable[str]) -> dict[str, list[Triple]]:
        records = await self._read(CHUNK_TRIPLES, chunks=list(dict.fromkeys(chunks)),
                                   user=user, collection=collection)
        found: dict[str, list[Triple]] = {}
        for record in records:
            found.setdefault(record["chunk"], []).append(_triple(record))
        return found

    async def count(self, user: str, collection: str) -> int:
        [record] = await self._read(COUNT, user=user, collection=collection)
        return record["n"]

    async def provenance_count(self, user: str, collection: str) -> int:
        [record] = await self._read(PROVENANCE_COUNT, user=user, collection=collection)
        return record["n"]

    async def version(self, user: str, collection: str) -> int:
        records = await self._read(VERSION, user=user, collection=collection)
        return records[0]["version"] if records else 0

    async def provenance_page(self, user: str, collection: str, after: str = "",
                              limit: int = 1000) -> tuple[list[ProvenanceRow], str | None]:
        skip = int(after or 0)
        if skip < 0:
            raise ValueError(f"after: {after!r} is not the next of a page")
        records = await self._read(PROVENANCE_PAGE, user=user, collection=collection,
                                   after=skip, limit=limit)
        rows = [(r["s"], r["p"], r["o"], r["ot"] == "i", r["document"], r["chunk"])
                for r in records]
        return rows, str(skip + len(rows)) if len(rows) == limit else None

    async def edges(self, user: str, collection: str, after: int = 0,
                    limit: int = 10000) -> EdgePage:
        records = await self._read(EDGES, user=user, collection=collection, after=after,
                                   limit=limit)
        weights = {(r["subject"], r["object"]): r["weight"] for r in records}
        named = {iri for pair in weights for iri in pair}
        keys = [json.dumps([user, collection, "i", iri]) for iri in named]  # term_key's
        labels = {r["entity"]: r["label"]
                  for r in await self._read(LABELS, keys=keys, label=RDFS_LABEL)}
        return EdgePage.of(weights, labels,
                           after + len(records) if len(records) == limit else None)


def _triple(record) -> Triple:
    return make_triple(record["s"], record["p"], record["o"], record["ot"] == "i")
