"""TrustGraph's own published client and CLI (``trustgraph-base`` and
``trustgraph-cli`` from PyPI, at ``VERSION``) in a virtualenv of their own: their
package is also named ``trustgraph``, so they can never share ours.

The venv is made with the ``uv`` that ``make install`` puts beside this interpreter,
once, under ``.venv/`` (ignored by git), and reused by every later session; a marker
written last says it is whole, so one a session left half made is made again, and a
lock lets one process make it while the others wait. A fresh
clone's first session makes it (~10 s with a warm package cache).

``TrustGraphTools.python(script)`` runs Python with TrustGraph's client importable;
``command(name, *args)`` runs one of its ``tg-*`` commands. Both return
``(exit status, stdout, stderr)``. TrustGraph's commands print ``Exception: ...``
and still exit 0 when they fail: read their output, not only the status.
"""
import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VERSION = "2.11.1"
PACKAGES = (f"trustgraph-base=={VERSION}", f"trustgraph-cli=={VERSION}")
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # seconds for one command (a start-up and a few requests)


@dataclass(frozen=True)
class TrustGraphTools:
    venv: Path

    def python(self, script: str, *args: str, env: dict[str, str] | None = None
               ) -> tuple[int, str, str]:
        return self._run([str(self.venv / "bin" / "python"), "-c", script, *args], env)

    def command(self, name: str, *args: str, stdin: str | None = None,
                env: dict[str, str] | None = None) -> tuple[int, str, str]:
        return self._run([str(self.venv / "bin" / name), *args], env, stdin)

    def _run(self, argv: list[str], env: dict[str, str] | None,
             stdin: str | None = None) -> tuple[int, str, str]:
        # Neither our package nor the host's TrustGraph settings leak in.
        clean = {key: value for key, value in os.environ.items()
                 if not key.startswith(("TRUSTGRAPH_", "PYTHON"))}
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=TIMEOUT, env=clean | (env or {}),
                              stdin=None if stdin is not None else subprocess.DEVNULL)
        return done.returncode, done.stdout, done.stderr


def trustgraph_tools() -> TrustGraphTools:
    """The venv, made on first use (by one process at a time: the suite's workers
    may all ask at once)."""
    venv = ROOT / ".venv" / f"trustgraph-{VERSION}"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".complete").exists():
            _make(venv)
    return TrustGraphTools(venv)


def _make(venv: Path) -> None:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        raise RuntimeError(f"no uv beside {sys.executable}: run make install")
    shutil.rmtree(venv, ignore_errors=True)  # a venv a session left unfinished
    try:
        # --python: this interpreter's version, as the project's own venv uses. Made
        # in place (its scripts name their interpreter by its path): only the marker
        # says it is whole.
        for argv in ([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)],
                     [str(uv), "pip", "install", "--quiet", "--python",
                      str(venv / "bin" / "python"), *PACKAGES]):
            subprocess.run(argv, check=True, capture_output=True, text=True, timeout=600)
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"could not install TrustGraph {VERSION}'s client and CLI: "
                           f"{error.stderr.strip()[-2000:]}") from None
    (venv / ".complete").touch()
