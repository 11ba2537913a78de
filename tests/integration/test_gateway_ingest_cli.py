"""tg-load-text and tg-load-pdf (run in this process, against an in-process gateway
and librarian): which files a folder gives and the ids they get, the summary and exit
status, per-file failures, retrying loads that fail for a passing reason, and
stopping when the load service is not there at all."""
import asyncio
import uuid
from dataclasses import replace

import pytest
import pytest_asyncio

from tests.support.ingest_stack import IngestStack
from trustgraph.api import AsyncTrustGraph
from trustgraph.base import (
    TIMING,
    Context,
    HandledError,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Service,
)
from trustgraph.cli import load_pdf, load_text, loading
from trustgraph.gateway.core import dispatch
from trustgraph.schema import LoadResponse, TextLoadRequest

pytestmark = pytest.mark.asyncio(loop_scope="module")

FLAKY = f"flaky-{uuid.uuid4().hex[:6]}"     # text-load refuses each id once: overloaded
ABSENT = f"absent-{uuid.uuid4().hex[:6]}"   # routed by the gateway, served by nobody
attempts: dict[str, int] = {}


async def flaky_load(request: TextLoadRequest, ctx: Context) -> LoadResponse:
    attempts[request.id] = attempts.get(request.id, 0) + 1
    if attempts[request.id] == 1:
        raise HandledError("overloaded", "busy; try again shortly")
    return LoadResponse()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, tmp_path_factory):
    stack = IngestStack(broker, tmp_path_factory.mktemp("cli"), other_flows=[FLAKY, ABSENT])
    flaky = Processor(ProcessorSpec("flaky-load", ProcessorSettings, lambda s: [
        Service("text-load", TextLoadRequest, LoadResponse, flaky_load)]),
        ProcessorSettings(pulsar_url=broker.url, tg_flows=[FLAKY]))
    try:
        await flaky.start()
        yield await stack.start()
    finally:
        await stack.stop()
        await flaky.stop()


async def tg(capsys, main, stack, *args: str) -> tuple[int, str, str]:
    """A command's ``main`` in a thread (it runs its own event loop)."""
    code = await asyncio.to_thread(main, ["-u", stack.url, *args])
    out, err = capsys.readouterr()
    return code, out, err


async def documents(stack, collection: str) -> list[str]:
    async with AsyncTrustGraph(stack.url) as client:
        return [d["id"] for d in await client.list_documents(collection=collection)]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "b.md").write_text("# beta")
    (tmp_path / "deep" / "er" / "c.markdown").write_text("gamma")
    (tmp_path / "deep" / "skip.pdf").write_bytes(b"%PDF-1.4 not for tg-load-text")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "hidden.txt").write_text("hidden")
    (tmp_path / "deep" / ".draft.txt").write_text("hidden too")
    return tmp_path


async def test_a_folder_gives_its_files_by_suffix_with_relative_ids(stack, capsys, tree):
    code, out, err = await tg(capsys, load_text.main, stack, str(tree), "-C", "tree",
                              "-f", stack.flow)
    assert (code, err) == (0, "")
    assert out.startswith("loaded 3 files (16 B) in ") and out.endswith("; 0 failed\n")
    assert await documents(stack, "tree") == ["a.txt", "deep/b.md", "deep/er/c.markdown"]

    # Loading again replaces the same documents; a file named directly is its name;
    # --prefix goes in front of every id.
    assert (await tg(capsys, load_text.main, stack, str(tree), "-C", "tree",
                     "-f", stack.flow))[0] == 0
    code, _, _ = await tg(capsys, load_text.main, stack, str(tree / "deep" / "b.md"),
                          str(tree), "--prefix", "v2/", "-C", "tree", "-f", stack.flow)
    assert code == 0
    assert await documents(stack, "tree") == [
        "a.txt", "deep/b.md", "deep/er/c.markdown", "v2/a.txt", "v2/b.md", "v2/deep/b.md",
        "v2/deep/er/c.markdown"]


async def test_two_files_claiming_one_id_fail_the_second(stack, capsys, tmp_path):
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.txt").write_text(folder)
    code, out, err = await tg(capsys, load_text.main, stack, str(tmp_path / "one"),
                              str(tmp_path / "two"), "-C", "same", "-f", stack.flow)
    assert code == 1 and out.startswith("loaded 1 file (3 B)") and out.endswith("; 1 failed\n")
    assert err == (f"tg-load-text: {tmp_path / 'two' / 'same.txt'}: document id 'same.txt' is "
                   f"already taken by {tmp_path / 'one' / 'same.txt'} (use --prefix to tell "
                   f"them apart)\n")


async def test_nothing_to_load_is_an_error(stack, capsys, tmp_path):
    code, out, err = await tg(capsys, load_pdf.main, stack, str(tmp_path), "-f", stack.flow)
    assert code == 1 and out.startswith("loaded 0 files (0 B)")
    assert err == "tg-load-pdf: nothing to load (no .pdf files found)\n"


async def test_loads_refused_for_a_passing_reason_are_sent_again(stack, capsys, tree):
    code, out, err = await tg(capsys, load_text.main, stack, str(tree), "-f", FLAKY)
    assert (code, err) == (0, ""), err
    assert out.startswith("loaded 3 files")
    assert attempts == {"a.txt": 2, "deep/b.md": 2, "deep/er/c.markdown": 2}


async def test_no_load_service_at_all_stops_the_run(stack, capsys, tree, monkeypatch):
    monkeypatch.setattr(loading, "RETRIES", 0)  # each attempt waits out the accept_timeout
    # The gateway's requester for that flow, made at this first request, gives up
    # after 0.5 s (the product's 5 s would only make the test wait).
    monkeypatch.setattr(dispatch, "TIMING", replace(TIMING, accept_timeout=0.5))
    code, out, err = await tg(capsys, load_text.main, stack, str(tree), "-f", ABSENT,
                              "--concurrency", "1")
    assert code == 1 and out.startswith("loaded 0 files (0 B)")
    assert err.startswith(f"tg-load-text: no-service: no text-load processor took the "
                          f"request on flow {ABSENT} within 0.5 s")
    assert err.count("\n") == 1
