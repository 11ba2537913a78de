"""Community detection in a child process of its own (``leiden.py``): the graph
version and what is not an entity on its command line, the entity graph's pages
(undecoded, ``pages.py``) on its stdin; the ``Communities`` back as JSON on its
stdout (the text the cache stores as it is).

A plain child process rather than a multiprocessing pool: a spawned pool worker
re-imports the parent's main module (the whole processor: 11–16 s to start on a busy
2-core machine), while this imports only igraph, leidenalg and numpy. Pages go to
the child as they arrive, as the bytes they arrived as: the serving process never
decodes, holds or pickles the graph, and Leiden runs at a lower priority on its own
core, neither blocking the serving process's event loop nor holding its GIL.
"""
from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

from .communities import Communities
from .graph import NOT_ENTITIES
from .pages import framed

LEIDEN = f"{__package__}.leiden"  # by name: this process never imports igraph


async def detect_in_subprocess(version: int, pages: AsyncIterator[bytes],
                               not_entities: tuple[str, ...] = NOT_ENTITIES
                               ) -> tuple[Communities, str]:
    """The communities of the graph ``pages`` give (``graph-edges`` JSON; IRIs
    starting with one of ``not_entities`` left out), and their JSON."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", LEIDEN, str(version), *not_entities,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    stdin = process.stdin
    assert stdin is not None  # stdin=PIPE
    try:
        async for page in pages:
            stdin.write(framed(page))
            await stdin.drain()
        stdin.close()
        out, err = await process.communicate()
    finally:
        if process.returncode is None:  # failed or cancelled: the computation goes too
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"community detection failed: {err.decode()[-1000:]}")
    body = out.decode()
    return await asyncio.to_thread(lambda: Communities.from_json(json.loads(body))), body
