"""Replicas: several processes of one part sharing its work (``tg-start --replicas
NAME=N``, or ``TG_REPLICAS=NAME=N,...``).

Every replica subscribes to the same Shared subscriptions, so the broker spreads the
requests and the pipeline records over them, and a replica that dies leaves its
unacknowledged pipeline records to the others (redelivered) and its requests to
their requesters (re-sent until a replica accepts one; an accepted one whose replica
died ends in a clear error after the requesters' liveness). Replica ``i`` runs with
``TG_REPLICA=i``: pulsar-lite refuses a second process's consumer on a Shared
subscription if both have the same client-side consumer id, so each replica skips
``i`` ids first (``trustgraph.pubsub.bus``; real Pulsar needs none of this).

``NAME`` is a part in ``TG_PROCESSORS``, or a member of a process group there, which
then runs as N processes of the whole group. Replica 0 keeps the part's name, the
others are ``<part>.1``, ``<part>.2``, … (their pid and ready files, their log lines).
"""
from collections.abc import Mapping

from .registry import GATEWAY, members

REPLICA_SEPARATOR = "."
# Parts that must run as one process, and why (None: always; else the variable
# whose presence lifts the rule).
SINGLE: dict[str, tuple[str | None, str]] = {
    GATEWAY: (None, "it listens on one port; put a load balancer in front of gateways "
                    "started on other ports or machines instead"),
    "vector-store": ("QDRANT_URL", "in embedded mode one process owns the Qdrant Edge "
                                   "shards; replicate it against a Qdrant server "
                                   "(QDRANT_URL)"),
}


class ReplicasError(ValueError):
    pass


def replica_name(part: str, index: int) -> str:
    return part if index == 0 else f"{part}{REPLICA_SEPARATOR}{index}"


def replica_counts(entries: list[str], parts: list[str],
                   environ: Mapping[str, str]) -> dict[str, int]:
    """How many processes each of ``parts`` runs (only those with more than one),
    from ``NAME=N`` ``entries``."""
    counts: dict[str, int] = {}
    for entry in entries:
        name, equals, count = entry.partition("=")
        name = name.strip()
        if not equals or not count.strip().isdigit() or int(count) < 1:
            raise ReplicasError(f"replicas: {entry!r} is not NAME=N (N a whole number, "
                                f"at least 1), e.g. document-rag=2")
        part = _part_of(name, parts)
        _check_replicable(part, int(count), environ)
        if int(count) > 1:
            counts[part] = int(count)
    return counts


def _part_of(name: str, parts: list[str]) -> str:
    for part in parts:
        if name == part or name in members(part):
            return part
    raise ReplicasError(f"replicas: {name!r} is not among the parts being started "
                        f"({', '.join(parts)})")


def _check_replicable(part: str, count: int, environ: Mapping[str, str]) -> None:
    if count == 1:
        return
    for name in members(part):
        if name in SINGLE:
            lifted_by, why = SINGLE[name]
            if lifted_by is None or not environ.get(lifted_by):
                raise ReplicasError(f"replicas: {name} cannot run as {count} processes: "
                                    f"{why}")
