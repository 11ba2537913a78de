"""Counting what a processor's stage handlers have done, to wait on: ``Handled.wrap``
wraps a ``ProcessorSpec``'s parts factory so that every stage handler counts its
completions by stage name."""
import asyncio
import inspect
from collections import Counter

from tests.support.waiting import signalled
from trustgraph.base import Rejected, Stage


class Handled:
    """Stage handler completions (returned or rejected; ``"<stage>:raised"`` for a
    failure that means redelivery), to wait on."""

    def __init__(self):
        self.counts = Counter()
        self.changed = asyncio.Event()
        self.fail_once: set[str] = set()  # stages whose next call fails AFTER its effect

    def wrap(self, factory):
        async def parts(runtime):
            made = factory(runtime)
            made = await made if inspect.isawaitable(made) else made
            return [Stage(p.name, p.record, self._counting(p), p.subscription)
                    if isinstance(p, Stage) else p for p in made]
        return parts

    def _counting(self, stage: Stage):
        async def handler(record, ctx):
            try:
                await stage.handler(record, ctx)
            except Rejected:
                self._done(stage.name)
                raise
            except Exception:
                self._done(f"{stage.name}:raised")
                raise
            if stage.name in self.fail_once:
                self.fail_once.discard(stage.name)
                self.counts[f"{stage.name}:failed"] += 1
                raise RuntimeError("crashed after the write, before the acknowledgement")
            self._done(stage.name)
        return handler

    def _done(self, name):
        self.counts[name] += 1
        self.changed.set()

    async def until(self, name, count, timeout=20.0):
        await signalled(self.changed, lambda: self.counts[name] >= count,
                        f"{count} × {name} handled", timeout=timeout)
