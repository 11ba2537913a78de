"""``tg-run <name> [flags]``: run one part of the platform by its registry name.

The flags after the name belong to that part (its settings model); ``tg-run <name>
--help`` lists them. ``tg-start`` runs its children through this module too, with
``TG_SUPERVISOR_PID`` set (see ``_under_supervisor``) and ``TG_READY_FILE``, which a
processor touches once it is subscribed (``trustgraph.base.processor``).
"""
import ctypes
import os
import signal
import sys

from .registry import PROVIDER_PREFIX, RUNNABLES, main_of

PR_SET_PDEATHSIG = 1


def usage() -> str:
    names = "\n".join(f"  {name:<18} {RUNNABLES[name].split(':')[0]}"
                      for name in sorted(RUNNABLES))
    return (f"usage: tg-run <name> [flags]    (tg-run <name> --help lists its flags)\n\n"
            f"names:\n{names}\n  {PROVIDER_PREFIX}<provider>  "
            f"text-completion with that provider (openai, anthropic, ollama, ...)\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), end="")
        return
    name, rest = argv[0], argv[1:]
    run = main_of(name)
    _under_supervisor(os.environ.get("TG_SUPERVISOR_PID"))
    run(rest)


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
