"""``tg-run <name> [flags]``: run one part of the platform by its registry name.

The flags after the name belong to that part (its settings model); ``tg-run <name>
--help`` lists them. ``tg-run prompt+text-completion`` runs a process group: the
members' specs built into processors in one process and one event loop, each with
its own settings, calling each other in-process (``trustgraph.base.local``); flags
after a group go to every member, so a setting only one member has belongs in the
environment. ``tg-start`` runs its children through this module too, with
``TG_SUPERVISOR_PID`` set (see ``_under_supervisor``) and ``TG_READY_FILE``, which a
processor touches once it is subscribed (``trustgraph.base.processor``).
"""
import asyncio
import ctypes
import logging
import os
import signal
import sys

from prometheus_client import start_http_server

from trustgraph.base import (
    Processor,
    ProcessorSpec,
    exit_process,
    load_settings,
    serve_together,
)
from trustgraph.base.settings import start_tracing

from .registry import (
    GATEWAY,
    GROUP_SEPARATOR,
    PROVIDER_PREFIX,
    RUNNABLES,
    gateway_main,
    members,
    spec_of,
)

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
    if names == [GATEWAY]:
        gateway = gateway_main()
        _under_supervisor(os.environ.get("TG_SUPERVISOR_PID"))
        gateway(rest)
        return
    if len(names) > 1 and ("-h" in rest or "--help" in rest):
        print(f"tg-run {name}: flags after a group go to every member; each member's "
              f"own flags: tg-run <member> --help")
        return
    specs = [spec_of(member, rest) for member in names]
    _under_supervisor(os.environ.get("TG_SUPERVISOR_PID"))
    serve(_labelled(name, os.environ.get("TG_REPLICA", "")), specs, rest)


def _labelled(name: str, replica: str) -> str:
    """What the log lines call this process: a replica but the first says which
    (as tg-start names its pid and ready files)."""
    return f"{name}.{replica}" if replica.isdigit() and int(replica) > 0 else name


def serve(label: str, specs: list[ProcessorSpec], argv: list[str]) -> None:
    """Build each spec into a processor with its own settings, then serve them all in
    one event loop: ready once all serve, stopped together."""
    # Every line names the process (the group's label); same format for all members.
    settings = [load_settings(spec.settings, argv, label) for spec in specs]
    logging.getLogger().setLevel(settings[0].tg_log_level.upper())
    start_tracing(settings[0], label)  # before the processors: their runners take tracers
    if settings[0].tg_metrics_port:  # one endpoint for the process (a group's members too)
        start_http_server(settings[0].tg_metrics_port)
    processors = [Processor(spec, each, process=label)
                  for spec, each in zip(specs, settings, strict=True)]
    asyncio.run(serve_together(processors))
    exit_process(0)  # stopped cleanly: no interpreter finalization (base/exiting.py)


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
