"""Process groups: ``tg-run a+b`` and TG_PROCESSORS entries naming several processors
served in one process; ready only once all serve, stopped together."""
import asyncio
import os
import signal
from dataclasses import dataclass

import pytest

from tests.support.waiting import eventually
from trustgraph.base.local import LocalServices
from trustgraph.base.processor import serve_together
from trustgraph.run import registry, single
from trustgraph.run.registry import members
from trustgraph.run.start import StartError, StartSettings, plan


def test_an_entry_names_one_processor_or_a_group():
    assert members("prompt") == ["prompt"]
    assert members("prompt + text-completion-openai") == ["prompt", "text-completion-openai"]


def test_callers_stop_before_the_services_they_call():
    """tg-start's stop order (registry.STOP_ORDER): a group in the wave of its
    earliest member, a provider's text-completion with the answering services, a
    processor not named with the services."""
    assert registry.stop_waves(registry.DEFAULT_STACK) == [
        ["gateway"],
        ["librarian", "decoder", "embeddings+chunk-embeddings+entity-embeddings", "extract"],
        ["prompt+text-completion+graph-rag+document-rag+agent+lazy-rag"],
        ["triples-store", "vector-store"],
        ["config"]]
    assert registry.stop_waves(["config", "text-completion-openai", "someday", "gateway"]) \
        == [["gateway"], ["text-completion-openai"], ["someday"], ["config"]]


@pytest.mark.parametrize("entry, message", [
    ("prompt+", r"empty name in process group 'prompt\+'"),
    ("prompt+prompt", "a name appears twice in process group"),
    ("prompt+gateway", "gateway runs in a process of its own"),
])
def test_bad_groups_are_refused(entry, message):
    with pytest.raises(ValueError, match=message):
        members(entry)
    with pytest.raises(SystemExit, match=message):
        single.main([entry])
    with pytest.raises(StartError, match=message):
        plan([entry], StartSettings())


def test_tg_run_names_an_unknown_member():
    with pytest.raises(SystemExit, match="unknown processor 'nope'"):
        single.main(["prompt+nope"])


def test_tg_run_help_lists_groups_and_says_where_flags_go(capsys):
    single.main([])
    assert "a+b+...            those processors in one process" in capsys.readouterr().out
    single.main(["prompt+text-completion", "--help"])
    assert "flags after a group go to every member" in capsys.readouterr().out


def test_plan_keeps_groups_as_one_part_and_drops_what_is_not_installed(monkeypatch, capsys):
    monkeypatch.setitem(registry.RUNNABLES, "ghost", "trustgraph.ghost.service:main")
    assert plan(["gateway", "config", "prompt+text-completion"], StartSettings()) == \
        ["config", "prompt+text-completion", "gateway"]
    assert plan(["prompt+ghost+text-completion", "config"], StartSettings()) == \
        ["prompt+text-completion", "config"]
    assert "skipping ghost: trustgraph.ghost.service is not installed" in capsys.readouterr().out


def test_plan_refuses_a_processor_named_twice():
    with pytest.raises(StartError, match="TG_PROCESSORS names prompt twice"):
        plan(["prompt", "prompt+text-completion"], StartSettings())


def not_a_processor(argv):
    """A runnable that builds no ``ProcessorSpec``."""


def test_a_part_that_is_not_a_processor_cannot_join_a_group(monkeypatch):
    monkeypatch.setitem(registry.RUNNABLES, "plain", f"{__name__}:not_a_processor")
    with pytest.raises(SystemExit, match="plain cannot run in a process group"):
        single.main(["config+plain"])


def test_every_registered_processor_is_a_spec_that_tg_run_builds():
    for name in registry.RUNNABLES:
        if name != registry.GATEWAY:
            assert registry.spec_of(name, []).settings is not None


@dataclass
class Spec:
    name: str


class Fake:
    """Stands in for a ``Processor``: its start waits for ``release``."""

    def __init__(self, name: str, fail: bool = False) -> None:
        self.spec = Spec(name)
        self.local = None
        self.fail = fail
        self.release = asyncio.Event()
        self.starting = asyncio.Event()
        self.started = self.stopped = False

    async def start(self) -> None:
        self.starting.set()
        await self.release.wait()
        if self.fail:
            raise RuntimeError(f"{self.spec.name} failed")
        self.started = True

    async def stop(self) -> None:
        self.stopped = True


async def test_a_group_is_ready_once_every_member_serves_and_stops_all(tmp_path, monkeypatch):
    ready = tmp_path / "ready"
    monkeypatch.setenv("TG_READY_FILE", str(ready))
    fast, slow = Fake("prompt"), Fake("text-completion")
    fast.release.set()
    serving = asyncio.create_task(serve_together([fast, slow]))
    await asyncio.wait_for(slow.starting.wait(), 5)
    for _ in range(20):
        await asyncio.sleep(0)
    assert fast.started and not ready.exists()
    slow.release.set()
    await eventually(ready.exists, "the ready file", timeout=5)
    assert isinstance(fast.local, LocalServices) and fast.local is slow.local
    os.kill(os.getpid(), signal.SIGTERM)  # serve_together's own handler takes it
    await asyncio.wait_for(serving, 5)
    assert fast.stopped and slow.stopped


async def test_a_member_failing_to_start_stops_the_others_and_is_not_ready(tmp_path,
                                                                         monkeypatch):
    ready = tmp_path / "ready"
    monkeypatch.setenv("TG_READY_FILE", str(ready))
    good, bad = Fake("config"), Fake("prompt", fail=True)
    good.release.set()
    bad.release.set()
    with pytest.raises(RuntimeError, match="prompt failed"):
        await serve_together([good, bad])
    assert good.stopped and not ready.exists()


async def test_a_processor_alone_shares_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TG_READY_FILE", str(tmp_path / "ready"))
    alone = Fake("prompt")
    alone.release.set()
    serving = asyncio.create_task(serve_together([alone]))
    await eventually((tmp_path / "ready").exists, "the ready file", timeout=5)
    assert alone.local is None
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(serving, 5)
