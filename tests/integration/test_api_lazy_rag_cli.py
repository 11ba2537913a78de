"""tg-invoke-lazy-rag and tg-show-communities against a real gateway and broker in
front of scripted LazyRAG services (tests/support/scripted_lazy_rag.py), each
command's ``main`` run in this process (tests/support/cli.py)."""

import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.scripted_lazy_rag import (
    CONFIDENCE,
    MODEL,
    SUMMARY_ERROR,
    expected_text,
    missing_for,
    scripted_lazy_rag_stack,
)
from tests.support.scripted_rag import ScriptedRagGateway
from trustgraph.cli import invoke_lazy_rag

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_lazy_rag_stack(broker.url) as stack:
        yield stack


async def tg(url: str, rig: ScriptedRagGateway, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", url, "-f", rig.flow, *args, timeout=DEADLINE)


def after_answer(query: str) -> str:
    """What follows the answer: its confidence and what is missing."""
    return (f"\nConfidence: {CONFIDENCE:.2f}\nMissing information:\n"
            + "".join(f"- {item}\n" for item in missing_for(query)))


async def test_streams_the_answer_then_confidence_and_missing_information(rig):
    code, out, err = await tg(rig.url, rig, "tg-invoke-lazy-rag", "-q", "[tokens=12]")
    assert (code, out, err) == (0, expected_text(12) + "\n" + after_answer("[tokens=12]"), "")
    assert rig.rag.requests[-1].streaming is True


async def test_whole_answer_with_options_sources_and_usage(rig):
    code, out, err = await tg(rig.url, rig, "tg-invoke-lazy-rag", "-q", "[tokens=2]",
                              "--max-hops", "3", "--max-entities", "9", "--no-communities",
                              "-U", "ann", "-C", "notes", "--show-sources", "--show-usage",
                              "--no-streaming")
    assert code == 0, err
    assert out == ("Sources (2):\n"
                   "[1] notes document 1 (doc1) 0.100: text 1 of notes\n"
                   "[2] notes document 2 (doc2) 0.200: text 2 of notes\n"
                   "\n" + expected_text(2) + "\n" + after_answer("[tokens=2]"))
    assert err == f"Input tokens: 11  Output tokens: 2  Model: {MODEL}\n"
    sent = rig.rag.requests[-1]
    assert (sent.max_hops, sent.max_entities, sent.use_communities, sent.user,
            sent.collection, sent.streaming) == (3, 9, False, "ann", "notes", False)


async def test_an_llm_failure_prints_what_was_found_and_fails(rig):
    code, out, err = await tg(rig.url, rig, "tg-invoke-lazy-rag", "-q", "[summary_fail=1]")
    assert code == 1 and out == after_answer("[summary_fail=1]")
    assert err == f"tg-invoke-lazy-rag: {SUMMARY_ERROR.type}: {SUMMARY_ERROR.message}\n"


async def test_bad_arguments_exit_2(capsys):
    # argparse refuses before anything connects: checked in this process.
    with pytest.raises(SystemExit) as exit:
        invoke_lazy_rag.main(["-q", "q", "--max-hops", "0"])
    out, err = capsys.readouterr()
    assert exit.value.code == 2 and out == "" and "less than 1" in err


async def test_turned_off_it_says_how_to_enable(rig):
    code, out, err = await tg(rig.off_url, rig, "tg-invoke-lazy-rag", "-q", "q")
    assert code == 1 and out == ""
    assert err.startswith("tg-invoke-lazy-rag: disabled: ") and "LAZY_RAG_ENABLED" in err


async def test_show_communities_of_a_collection_and_of_a_question(rig):
    code, out, err = await tg(rig.url, rig, "tg-show-communities", "-C", "notes")
    assert (code, err) == (0, "")
    assert out == ("Collection notes: 1 communities, 1 levels, 3 entities\n"
                   "State: fresh (graph version 4)\nComputed: never\n")
    code, out, err = await tg(rig.url, rig, "tg-show-communities", "-C", "notes", "-q", "who?",
                              "--max-entities", "2")
    assert (code, err) == (0, "")
    assert out == ("[c0] level 0, 2 entities: notes 0, notes 1\n"
                   "    notes 0 — knows — notes 1\n")
    assert rig.rag.requests[-1].use_communities is True
