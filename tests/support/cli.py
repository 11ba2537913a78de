"""A ``tg-*`` command run in this process, as its console script would run it.

Each installed command costs a Python start-up (~1 s of CPU importing aiohttp and
pydantic); most CLI tests only need what the command prints and its exit status, so
they call the same ``main`` here. Tests about the process itself (Ctrl-C, a pipe
closing) still start the installed script.

The command runs in a thread (its ``main`` runs its own event loop) with ``sys.stdout``
/ ``sys.stderr`` redirected and ``sys.argv[0]`` set to the command, so argparse names it
as the shell would; one command at a time.
"""
import asyncio
import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from importlib.metadata import entry_points

_MAINS = {ep.name: ep for ep in entry_points(group="console_scripts")
          if ep.name.startswith("tg-")}


def installed(command: str) -> bool:
    """Whether ``command`` is one of the installed tg-* commands."""
    return command in _MAINS


def run_command(command: str, argv: list[str]) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``command argv...``, as from a shell."""
    main = _MAINS[command].load()
    out, err = io.StringIO(), io.StringIO()
    program = sys.argv[0]
    sys.argv[0] = command
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exit:
                status = exit.code
    finally:
        sys.argv[0] = program
    if isinstance(status, str):  # sys.exit("message"): printed, status 1
        err.write(status + "\n")
        status = 1
    return status or 0, out.getvalue(), err.getvalue()


async def tg_command(command: str, *argv: str, timeout: float) -> tuple[int, str, str]:
    """``run_command`` off the event loop, within ``timeout`` seconds."""
    return await asyncio.wait_for(asyncio.to_thread(run_command, command, list(argv)),
                                  timeout)
