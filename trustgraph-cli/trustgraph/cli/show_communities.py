"""tg-show-communities: LazyRAG's communities of a collection: the cache's state
(lazy-rag-status), or with -q the communities a question touches (lazy-rag-expand,
no LLM)."""
import argparse
import sys
import time
from typing import Any

from trustgraph.api import TrustGraphError

from .common import connect, parser, positive, run, scope_options

PROG = "tg-show-communities"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Show the communities LazyRAG found in a collection's knowledge graph (computed "
        "when a question first needs them, cached until the graph changes); with -q, "
        "the communities that question's subgraph touches, with their members and "
        "relations.")))
    arguments.add_argument("-q", "--question",
                           help="show the communities this question touches")
    arguments.add_argument("--max-hops", type=positive, help="hops from a seed entity (-q)")
    arguments.add_argument("--max-entities", type=positive, help="most entities (-q)")
    return arguments.parse_args(argv)


async def show(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        if args.question:
            found = await client.lazy_rag_expand(
                args.question, user=args.user, collection=args.collection,
                max_hops=args.max_hops, max_entities=args.max_entities,
                use_communities=True, flow=args.flow_id)
            lines = community_lines(found.communities)
        else:
            status = await client.lazy_rag_status(user=args.user, collection=args.collection,
                                                  flow=args.flow_id)
            lines = cache_lines(status, args.collection)
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def community_lines(communities: list[dict[str, Any]]) -> list[str]:
    """``[id] level L, N entities: members``, then its relations, indented."""
    if not communities:
        return ["No communities touched."]
    lines = []
    for community in communities:
        members = ", ".join(community.get("members") or [])
        lines.append(f"[{community['id']}] level {community.get('level', 0)}, "
                     f"{community.get('size', 0)} entities: {members}")
        lines += [f"    {relation}" for relation in community.get("relations") or []]
    return lines


def cache_lines(status: dict[str, Any], collection: str) -> list[str]:
    """The collection's cache entry, one fact a line; refused when LazyRAG is off."""
    if not status.get("enabled", True):
        raise TrustGraphError("disabled", status.get("message") or "LazyRAG is off")
    entry = next((item for item in status.get("community_cache") or []
                  if item.get("collection") == collection), None)
    if entry is None:
        return [f"Collection {collection}: no communities computed yet (the first "
                f"LazyRAG question on it computes them)"]
    return [f"Collection {collection}: {entry.get('communities', 0)} communities, "
            f"{entry.get('levels', 0)} levels, {entry.get('entities', 0)} entities",
            f"State: {_state(entry)}",
            f"Computed: {_when(entry)}"]


def _state(entry: dict[str, Any]) -> str:
    if entry.get("computing"):
        return "computing"
    built, now = entry.get("cached_version"), entry.get("graph_version")
    if entry.get("fresh"):
        return f"fresh (graph version {now})"
    if built is None:
        return "not computed yet (the first LazyRAG question on it computes them)"
    return f"stale (built at graph version {built}, graph now at {now}; recomputed " \
           f"when a question needs it)"


def _when(entry: dict[str, Any]) -> str:
    if entry.get("computed_at") is None:
        return "never"
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["computed_at"]))
    seconds = entry.get("compute_seconds")
    return at if seconds is None else f"{at} in {seconds:.2f} s"


def main(argv: list[str] | None = None) -> int:
    return run(PROG, show(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
