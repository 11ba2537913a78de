"""The command lines README.md and docs/*.md show, read out of their fenced blocks, and
run as a user types them (tests/e2e/test_documented_commands.py).

A fenced block says what it holds by its info string:

* ``sh`` (``bash``, ``shell``): every line is a command, as typed (``#`` comments,
  ``\\`` continuations and quotes that span lines included);
* ``console``: a line starting ``$ `` is a command (with its continuations); the
  other lines are what it printed;
* anything else (``text``, ``json``, ``python``, ...) is not run. A block with no
  info string is an error (``unclassified``), and so is a ``text`` block of command
  lines none of which is a synopsis (``tg-x [options] FILE...``) or output
  (``tg-x: ...``): a new example is run unless the test's exceptions say why it
  cannot be.

``run`` runs one command in a directory with an environment. A ``tg-*`` command line
with no shell operators has its words split by bash itself (quotes, ``#`` comments,
``~``, globs, ``$VAR``: exactly as typed) and runs that argv through the command's
own ``main`` in this process (``tests/support/cli.py``): a Python start-up per
command was ~1 s of CPU. Anything else (pipes, redirects, ``curl``, ``make``) runs
in bash.
"""
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.cli import installed, run_command

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"sh", "bash", "shell"}
CONSOLE = "console"
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```",
                   re.S | re.M)
PROMPT = "$ "
# Reads like a typed command: a tg-* command, make, curl, python -m, with or without
# a prompt and leading VAR=value assignments.
COMMAND = re.compile(r"^(\$ )?([A-Z_]+=\S+ +)*(\.venv/bin/)?(tg-[a-z-]+|make|curl|python)( |$)")
OUTPUT = re.compile(r"^(\.venv/bin/)?tg-[a-z-]+: ")  # "tg-x: what it says"
# A synopsis: optional parts in brackets, repeats, or an upper-case placeholder.
SYNOPSIS = re.compile(r"\[|\.\.\.|…|\b[A-Z][A-Z_]+\b(?!=)")
OPERATORS = re.compile(r"[|&;<>()`\\]|\$\(")


@dataclass(frozen=True)
class Example:
    doc: str  # README.md, docs/cli.md
    line: int  # where the command starts
    command: str  # as typed, continuations included

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.command}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def blocks(path: Path) -> list[tuple[int, str, list[str]]]:
    """Each fenced block: (line of its first body line, info string, body lines)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        first = text.count("\n", 0, match.start("body")) + 1
        indent = len(match["indent"])  # a block in a list item: its lines indented
        lines = [line[indent:] for line in match["body"].splitlines()]
        found.append((first, match["info"].strip().split(" ")[0], lines))
    return found


def examples(path: Path) -> list[Example]:
    """The commands of a document's ``sh`` and ``console`` blocks, in order."""
    found = []
    for first, info, lines in blocks(path):
        if info in SHELL or info == CONSOLE:
            found += _commands(name(path), first, lines, prompted=info == CONSOLE)
    return found


def _commands(doc: str, first: int, lines: list[str], prompted: bool) -> list[Example]:
    found, pending, start = [], "", 0
    for number, line in enumerate(lines, first):
        if not pending:
            if prompted and not line.startswith(PROMPT):
                continue  # output
            line = line.removeprefix(PROMPT) if prompted else line
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = number
        pending = f"{pending}\n{line}" if pending else line
        if _complete(pending):
            found.append(Example(doc, start, pending))
            pending = ""
    assert not pending, f"{doc}:{start}: an unfinished command: {pending}"
    return found


def _complete(command: str) -> bool:
    """Whether bash would run this, or wait for more (a ``\\`` or an open quote)."""
    if command.endswith("\\"):
        return False
    return subprocess.run(["bash", "-n", "-c", command], capture_output=True).returncode == 0


def unclassified(path: Path) -> list[str]:
    """Blocks with no info string, and command-like lines in blocks that are not run."""
    problems = []
    for first, info, lines in blocks(path):
        if not info:
            problems.append(f"{name(path)}:{first}: a fenced block with no info string: "
                            f"sh or console (run by the tests), or text, json, ...")
        elif info not in SHELL and info != CONSOLE and _typed(lines):
            problems.append(f"{name(path)}:{first}: reads like commands to type, in a "
                            f"{info} block (tag it sh or console): {lines[0]}")
    return problems


def _typed(lines: list[str]) -> bool:
    """Commands to type: command lines, none of them a synopsis or output. A synopsis
    block may hold a bare command among its synopses (``tg-show-tools``)."""
    commands = [line for line in lines
                if COMMAND.match(line) and not OUTPUT.match(line.removeprefix(PROMPT))]
    return bool(commands) and not any(SYNOPSIS.search(line) for line in commands)


# --- running one ----------------------------------------------------------------------

@dataclass
class Ran:
    status: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.status}\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"


def run(command: str, cwd: Path, env: dict[str, str], timeout: float = 120.0) -> Ran:
    """``command`` as typed at a shell in ``cwd`` with ``env``."""
    argv = _argv(command, cwd, env)
    if argv is not None:
        with _inside(cwd, env):
            return Ran(*run_command(Path(argv[0]).name, argv[1:]))
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Ran(done.returncode, done.stdout, done.stderr)


def _argv(command: str, cwd: Path, env: dict[str, str]) -> list[str] | None:
    """The argv bash would run, for a tg-* command with no operators; else None."""
    if OPERATORS.search(command.replace("\\\n", " ")):
        return None
    words = subprocess.run(["bash", "-c", f'words() {{ printf "%s\\0" "$@"; }}; words {command}'],
                           cwd=cwd, env=env, capture_output=True, text=True, check=True
                           ).stdout.split("\0")[:-1]
    if not words or not re.fullmatch(r"(\.venv/bin/)?tg-[a-z-]+", words[0]) \
            or not installed(Path(words[0]).name):
        return None
    return words


@contextmanager
def _inside(cwd: Path, env: dict[str, str]):
    """This process in ``cwd`` with ``env``, as the command's own process would be."""
    before, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(before)
        sys.stdout.flush()
