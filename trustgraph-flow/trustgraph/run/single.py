"""``tg-run <name> [flags]``: run one part of the platform by its registry name.

The flags after the name belong to that part (its settings model); ``tg-run <name>
--help`` lists them. ``tg-run prompt+text-completion`` runs a process group: those
processors in one process and one event loop, each with its own settings, calling
each other in-process (``trustgraph.base.local``); flags after a group go to every
member, so a setting only one member has belongs in the environment. ``tg-start`` runs its children through this module too, with
``TG_SUPERVISOR_PID`` set (see ``_under_supervisor``) and ``TG_READY_FILE``, which a
processor touches once it is subscribed (``trustgraph.base.processor``).
"""
import asyncio
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable

from trustgraph.base.processor import gathering, serve_together

from .registry import GROUP_SEPARATOR, PROVIDER_PREFIX, RUNNABLES, main_of, members

PR_SET_PDEATHSIG = 1


def usage() -> str:
    names = "\n".join(f"  {name:<18} {RUNNABLES[name].split(':')[0]}"
                      for name in sorted(RUNNABLES))
    return (f"usage: tg-run <name> [flags]    (tg-run <name> --help lists its flags)\n\n"
            f"names:\n{names}\n  {PROVIDER_PREFIX}<provider>  "
            f"text-completion with that provider (openai, anthropic, ollama, ...)\n"
            f"  {GROUP_SEPARATOR.join(['a', 'b', '...']):<18} those processors in one "
            f"process (e.g. prompt{GROUP_SEPARATOR}text-completion)\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), end="")
        return
    name, rest = argv[0], argv[1:]
    try:
        names = members(name)
    except ValueError as error:
        raise SystemExit(f"tg-run: {error}") from None
    mains = [main_of(member) for member in names]
    _under_supervisor(os.environ.get("TG_SUPERVISOR_PID"))
    if len(mains) == 1:
        mains[0](rest)
    else:
        run_group(name, names, mains, rest)


def run_group(label: str, names: list[str], mains: list[Callable[[list[str]], None]],
              argv: list[str]) -> None:
    """Build each member as its own ``main`` would (its settings, its start-up code),
    then serve them all in one event loop: ready once all serve, stopped together."""
    if "-h" in argv or "--help" in argv:
        print(f"tg-run {label}: flags after a group go to every member; each member's "
              f"own flags: tg-run <member> --help")
        return
    # Before the members' own logging set-up (which then does nothing), so that each
    # line names the group; same format as ``load_settings``.
    logging.basicConfig(format=f"%(asctime)s {label} %(levelname)s %(name)s: %(message)s")
    with gathering() as processors:
        for name, main in zip(names, mains):
            built = len(processors)
            main(argv)
            if len(processors) != built + 1:
                raise SystemExit(f"tg-run: {name} cannot run in a process group")
    logging.getLogger().setLevel(processors[0].settings.tg_log_level.upper())
    asyncio.run(serve_together(processors))


def _under_supervisor(supervisor_pid: str | None) -> None:
    if supervisor_pid:
        _die_with(int(supervisor_pid))


def _die_with(supervisor_pid: int) -> None:
    """Get SIGTERM when tg-start dies, even by SIGKILL, so no child is left behind."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != supervisor_pid:  # it died before prctl took effect
        raise SystemExit(f"tg-start (pid {supervisor_pid}) is gone; not starting")


if __name__ == "__main__":
    main()
