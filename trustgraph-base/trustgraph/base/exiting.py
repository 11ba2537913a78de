"""How a process ends once its work is done and its bus is closed.

pulsar-client's threads wind down on their own after its client is closed: each
ends when the last C++ object that needs it goes, releasing whatever Python objects
its pending callbacks hold. A thread that does so after the interpreter has begun
to finalize is stopped by Python with ``pthread_exit``, and that unwinding through
the client's C++ frames aborts the whole process ("terminate called without an
active exception", exit status -6: a gateway stopped by SIGTERM did so on a loaded
machine, now and then). Nothing of the process's own is left to do by then (its
requests are answered or cancelled, its records acknowledged, its bus closed), so
it ends there: logs and standard streams flushed, then ``os._exit``, with no
interpreter finalization for such a thread to run into.
"""
import logging
import os
import sys
from typing import NoReturn


def exit_process(code: int = 0) -> NoReturn:
    """End this process now, after flushing what it wrote (see the module's doc)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing to save
            pass
    os._exit(code)
