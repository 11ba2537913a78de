"""The entity graph's pages on their way to the community computation's child
process: each ``graph-edges`` page exactly as the triples store encoded it, behind
its length (4 bytes, big-endian), one after another on the child's stdin.

The child decodes them (plain ``json``: it imports no pydantic), so the serving
process only copies bytes. ``read_graph`` runs in the child; ``framed`` in the
parent.
"""
import json
import struct
from collections import Counter
from typing import BinaryIO

LENGTH = struct.Struct(">I")

Graph = tuple[Counter[tuple[str, str]], dict[str, str]]  # weights of (s, o), labels


def framed(page: bytes) -> bytes:
    return LENGTH.pack(len(page)) + page


def read_graph(stream: BinaryIO, not_entities: tuple[str, ...]) -> Graph:
    """Every page on ``stream`` up to its end, added up: the weight of each pair of
    entities (IRIs not starting with one of ``not_entities``) and the labels."""
    weights: Counter[tuple[str, str]] = Counter()
    labels: dict[str, str] = {}
    while header := stream.read(LENGTH.size):
        page = json.loads(stream.read(LENGTH.unpack(header)[0]))
        if error := page.get("error"):
            raise SystemExit(f"graph-edges failed: {error.get('type')}: "
                             f"{error.get('message')}")
        for s, o, weight in page.get("edges") or ():
            if not s.startswith(not_entities) and not o.startswith(not_entities):
                weights[s, o] += weight
        labels.update(page.get("labels") or {})
    return weights, labels
