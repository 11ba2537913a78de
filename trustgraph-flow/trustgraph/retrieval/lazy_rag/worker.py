"""Community detection in a child process of its own: ``python -m
trustgraph.retrieval.lazy_rag.worker`` reads ``(version, weights, labels)`` pickled on
stdin and writes the pickled ``Communities`` on stdout.

A plain child process rather than a multiprocessing pool: a spawned pool worker
re-imports the parent's main module (the whole processor: 11–16 s to start on a busy
2-core machine), while this imports only igraph, leidenalg and numpy. Leiden then
runs on its own core, neither blocking the serving process's event loop nor holding
its GIL.
"""
import asyncio
import pickle
import sys
from collections.abc import Mapping

from .communities import Communities, detect


async def detect_in_subprocess(version: int, weights: Mapping[tuple[str, str], int],
                               labels: Mapping[str, str]) -> Communities:
    payload = await asyncio.to_thread(pickle.dumps, (version, dict(weights), dict(labels)),
                                      pickle.HIGHEST_PROTOCOL)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", __name__, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await process.communicate(payload)
    finally:
        if process.returncode is None:  # cancelled: the computation goes with it
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"community detection failed: {err.decode()[-1000:]}")
    return await asyncio.to_thread(pickle.loads, out)


def main() -> None:
    version, weights, labels = pickle.load(sys.stdin.buffer)
    found = detect(version, weights, labels)
    sys.stdout.buffer.write(pickle.dumps(found, pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    main()
