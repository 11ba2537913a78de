"""Every command line README.md and docs/*.md show (their ``sh`` and ``console``
blocks, tests/support/doc_examples.py) run as a user types it, against one
``tg-start`` default stack with the local OpenAI-format LLM: a documented command
cannot break unseen.

The test only sets up what a user would have: the stack (open, as ``make run``
starts it), the files and collections an example names, and the environment —
``PATH`` with the venv's commands, ``TRUSTGRAPH_URL`` for the tg-* commands, and
for ``curl``'s ``localhost:8888`` a ``.curlrc`` (``CURL_HOME``) connecting that
address to the stack's port, so the stack needs no fixed port. Each document's
commands run in order in a directory of their own; a command must exit 0 (or what
``EXPECTED`` says, and why). A command that cannot run here is in ``EXCEPTIONS``,
with the reason; every other one, a new one included, runs.

gateway.md's API keys close the open gateway, so its test runs last.
"""
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.agent_llm import SYSTEM, final
from tests.support.cli import run_command
from tests.support.doc_examples import (
    ROOT,
    Example,
    Ran,
    documents,
    examples,
    run,
    unclassified,
)
from tests.support.pdf import minimal_pdf
from tests.support.stack import SCRUBBED_PREFIXES, Stack, openai_server_thread
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES

pytestmark = pytest.mark.timeout(600)

BIN = Path(sys.executable).parent
DOCS_ADDRESS = "localhost:8888"  # where the docs' curl examples find the gateway

BENCH = "a benchmark: minutes of loading and asking; `make bench` runs it"
STACK = "starts tg-start in the foreground until Ctrl-C, on the default ports: the " \
        "stack these tests run on is this command (tests/support/stack.py)"
EXCEPTIONS = {
    ("README.md", "make run"): STACK,
    ("README.md", "make test"): "the suite these tests are part of",
    ("README.md", "make check"): "`make test` (.ci/run) runs it before the tests",
    ("README.md", "make fuzz"): "21,000 gateway fuzz cases: opt-in, minutes",
    ("README.md", "make soak"): "1,000 concurrent streams: opt-in, minutes",
    ("README.md", "export OPENAI_BASE_URL=http://localhost:8000/v1"):
        "points make run (below) at a real OpenAI-compatible server",
    ("README.md", "export OPENAI_API_KEY=sk-..."): "a real OpenAI key",
    ("README.md", "TG_LOCAL_MODEL=~/models/Qwen3-8B-Q4_K_M.gguf TG_LOCAL_THREADS=8 make run"):
        "a 5 GB model file the machine does not have",
    ("docs/evaluation.md", "tg-start &"): STACK,
    ("docs/evaluation.md", "python -m bench.retrieval --load http://localhost:8888/"): BENCH,
    ("docs/evaluation.md", "python -m bench.retrieval --questions stdlib.jsonl"): BENCH,
    ("docs/gateway.md", "tg-run gateway --pulsar-url pulsar://127.0.0.1:6650 "
                        "--tg-gateway-port 8888"):
        "a second gateway on the default ports; test_gateway_process.py runs tg-run "
        "gateway on free ones",
    ("docs/gateway.md", "export TRUSTGRAPH_TOKEN=tg_1a2b3c4d5e6f7a8b_q8Xx…"):
        "the example's key: the test exports the one tg-create-key printed above",
    ("docs/gateway.md", "tg-revoke-key 9f8e7d6c5b4a3921"):
        "the example's key id: the test revokes one tg-create-key made",
    ("docs/observability.md", "pip install arize-phoenix && phoenix serve"):
        "installs Arize Phoenix and serves it in the foreground; test_tracing_e2e.py "
        "runs a Phoenix of its own",
    ("docs/observability.md", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006 tg-start"):
        STACK,
    ("docs/openai.md", "TG_GATEWAY_HOST=0.0.0.0 TG_GATEWAY_TOKEN=change-me tg-start"): STACK,
    ("docs/openai.md", "docker run -d -p 3000:8080"): "docker, and Open WebUI's image",
    ("docs/operations.md", "OPENAI_API_KEY=sk-... tg-start"): STACK,
    ("docs/operations.md", "tg-start --replicas document-rag=2,extract=3"):
        STACK + "; test_replicas.py starts replicas",
    ("docs/retrieval.md", "TG_RETRIEVAL=vector TG_GRAPH_MIX=false tg-start"): STACK,
    ("docs/retrieval.md", "python -m bench.retrieval_lab --corpora stdlib"): BENCH,
    ("docs/retrieval.md", "python -m bench.retrieval_lab --corpora articles"): BENCH,
    ("docs/retrieval.md", "python -m bench.retrieval --settings vector hybrid"): BENCH,
    ("docs/retrieval.md", "python -m bench.graph --data /tmp/graph"): BENCH,
}


def exception(example: Example) -> str | None:
    """Why ``example`` is not run, if it is an exception: its command is the key's,
    give or take a trailing ``#`` comment and continuation lines."""
    for (doc, command), reason in EXCEPTIONS.items():
        rest = example.command.removeprefix(command)
        if doc == example.doc and rest != example.command and (
                not rest or rest[0].isspace()):
            return reason
    return None


def time_bar_only(ran: Ran) -> bool:
    """Exit 2 for the latency bar alone: times on a shared machine are not a result."""
    missed = [line for line in ran.err.splitlines() if "below the bar" in line]
    return ran.status == 0 or (ran.status == 2 and bool(missed) and all(
        "to_sources_p50_ms" in line for line in missed))


EXPECTED: dict[tuple[str, str], Callable[[Ran], bool]] = {
    ("docs/evaluation.md", "tg-eval regression.jsonl -C docs --min-recall-at-1 0.7 "
                           "--max-sources-p50-ms 100"): time_bar_only,
}


def expected(example: Example) -> Callable[[Ran], bool]:
    for (doc, command), check in EXPECTED.items():
        if doc == example.doc and example.command.startswith(command):
            return check
    return answered if example.command.startswith("curl ") else lambda ran: ran.status == 0


def answered(ran: Ran) -> bool:
    """curl exits 0 whatever the HTTP status: the body must be an answer, not an
    error (``{"error": ...}``, or an answer stream's error line or event)."""
    return ran.status == 0 and bool(ran.out.strip()) and not re.search(
        r'^(data: )?\{"error"|"type": ?"error"', ran.out, re.M)


# --- the stack and the user's shell ----------------------------------------------------

def agent_replies(prompt: str) -> str | None:
    """The agent's ReAct prompt gets a finished step, and the query rewrite (a JSON
    template the docs invoke) a query, each in its schema's shape; everything else
    the server's scripted tokens."""
    if SYSTEM["agent-react"] in prompt:
        return final("The documents answer it.", "What the documents say.")
    if DEFAULT_TEMPLATES["query-rewrite"].system in prompt:
        return json.dumps({"query": "what Acme did in 2019"})
    return None


@pytest.fixture(scope="module")
def stack():
    with openai_server_thread() as llm:
        llm.reply = agent_replies
        with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test"},
                   startup_timeout=120) as stack:
            yield stack


class Shell:
    """A user's shell on the stack: a directory of their own and an environment."""

    def __init__(self, stack: Stack, home: Path) -> None:
        self.cwd = home / "work"
        self.cwd.mkdir()
        (self.cwd / ".venv").symlink_to(BIN.parent)  # README's .venv/bin/tg-*
        (home / ".curlrc").write_text(
            f'connect-to = "{DOCS_ADDRESS}:127.0.0.1:{stack.gateway_port}"\n')
        host = {k: v for k, v in os.environ.items()
                if not k.startswith((*SCRUBBED_PREFIXES, "TRUSTGRAPH_"))}
        self.env = {**host, "PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(home),
                    "CURL_HOME": str(home), "TRUSTGRAPH_URL": stack.gateway_url}

    def files(self, files: dict[str, str | bytes]) -> None:
        for relative, content in files.items():
            path = self.cwd / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")

    def run(self, command: str) -> Ran:
        return run(command, self.cwd, self.env)


def run_document(doc: str, shell: Shell,
                 after: Callable[[Example, Ran], None] | None = None) -> None:
    """Every command of ``doc`` but the exceptions, in order; the failures all
    reported together. ``after``: what the user does with a command's output."""
    failures = []
    for example in examples(ROOT / doc):
        if exception(example) is not None:
            continue
        ran = shell.run(example.command)
        print(f"$ {example.command}\n{ran}")  # shown with a failure
        if not expected(example)(ran):
            failures.append(f"{example}\n{ran}")
        if after is not None:
            after(example, ran)
    assert not failures, "\n\n".join(failures)


def load(stack: Stack, directory: Path, collection: str, user: str | None = None) -> None:
    """A collection the examples ask, loaded as a user would (tg-load-text --wait)."""
    argv = ["-u", stack.gateway_url, "-C", collection, "--wait", str(directory)]
    status, out, err = run_command("tg-load-text", argv + (["-U", user] if user else []))
    assert status == 0, err


def corpus(tmp: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp / relative).write_text(text, encoding="utf-8")
    return tmp


ACME = {"acme.txt": "Acme was founded in 1962 by Ann Smith in Springfield. Ann Smith "
                    "built the first Acme factory by the river, and Acme made anvils."}


@pytest.fixture(scope="module")
def history(stack, tmp_path_factory):
    """The ``history`` collection the Acme examples ask."""
    load(stack, corpus(tmp_path_factory.mktemp("history"), ACME), "history")


@pytest.fixture
def shell(stack, tmp_path) -> Shell:
    return Shell(stack, tmp_path)


# --- the documents, in an order that keeps gateway.md's keys last ----------------------

def test_readme(shell):
    shell.files({
        "my-notes/trial.txt": "The LUMEN trial found that walking on the first day after "
                              "hip surgery halved the time patients needed to recover.",
        "my-notes/people.md": "# People\n\nDr. Ada Okafor led the LUMEN trial and worked "
                              "with Tomas Berg, who ran its statistics. Okafor also founded "
                              "the physiotherapy school of St. Brigid's Hospital.\n",
        "my-pdfs/hospital.pdf": minimal_pdf([[
            "St. Brigid's Hospital in Dublin hosted the LUMEN trial.",
            "Its surgeons operated on every patient of the trial."]]),
    })
    run_document("README.md", shell)


def test_cli(shell, history, stack, tmp_path_factory):
    load(stack, corpus(tmp_path_factory.mktemp("notes"), {
        "zanzibar.txt": "Stone Town is the old city of Zanzibar. Zanzibar traded cloves."}),
        "notes")
    run_document("docs/cli.md", shell)


def test_evaluation(shell, stack, tmp_path_factory):
    papers = {"fusion.txt": "Reciprocal rank fusion combines the rankings of several "
                            "retrieval systems by summing reciprocal ranks.",
              "okapi.txt": "Okapi BM25 weighs term frequency against document length "
                           "when it scores a document for a query."}
    load(stack, corpus(tmp_path_factory.mktemp("papers"), papers), "papers")
    load(stack, corpus(tmp_path_factory.mktemp("docs"), papers), "docs")
    load(stack, corpus(tmp_path_factory.mktemp("stdlib"), {
        "dataclasses.asdict.txt": "Return the fields of a dataclass instance as a new "
                              "dictionary mapping field names to field values."}),
        "stdlib", user="bench")
    questions = [{"question": "Which method sums reciprocal ranks of several systems?",
                  "expected": ["fusion.txt"], "answer": "reciprocal rank fusion"},
                 {"id": "q2", "question": "What does Okapi BM25 weigh when it scores?",
                  "expected": ["okapi.txt"]}]
    lines = "".join(json.dumps(q) + "\n" for q in questions)
    shell.files({
        "questions.jsonl": lines, "regression.jsonl": lines,
        "stdlib.jsonl": json.dumps({"question": "Return the fields of a dataclass instance "
                                                "as a new dictionary",
                                    "expected": ["dataclasses.asdict.txt"]}) + "\n",
        "queries.jsonl": '{"_id": "1", "text": "What does BM25 weigh?"}\n',
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\n1\tokapi\t1\n",
        "corpus.jsonl": json.dumps({"_id": "okapi", "title": "Okapi BM25",
                                    "text": papers["okapi.txt"]}) + "\n",
        "dev-v2.0.json": json.dumps({"version": "v2.0", "data": [{"title": "Okapi BM25",
            "paragraphs": [{"context": papers["okapi.txt"], "qas": [{
                "id": "a", "question": "What does BM25 weigh?", "is_impossible": False,
                "answers": [{"text": "term frequency", "answer_start": 18}]}]}]}]}),
    })
    run_document("docs/evaluation.md", shell)
    report = json.loads((shell.cwd / "report.json").read_text())
    assert [r["summary"]["errors"] for r in report] == [0, 0, 0, 0]
    assert report[0]["summary"]["recall@1"] == 1.0


def test_collections(shell, stack, tmp_path_factory):
    load(stack, corpus(tmp_path_factory.mktemp("old-notes"), ACME), "old-notes")
    run_document("docs/collections.md", shell)
    status, out, err = run_command("tg-list-collections", ["-u", stack.gateway_url])
    assert status == 0 and "old-notes" not in out, (out, err)


def test_flows(shell, stack):
    run_document("docs/flows.md", shell)
    status, out, err = run_command("tg-show-flows", ["-u", stack.gateway_url])
    assert status == 0 and "small-chunks" not in out and "default" in out, (out, err)


def test_prompts(shell, stack):
    run_document("docs/prompts.md", shell)
    status, out, err = run_command("tg-show-prompts", ["-u", stack.gateway_url])
    assert status == 0 and "my-people" in out, (out, err)


def test_knowledge_cores(shell, stack, tmp_path_factory):
    load(stack, corpus(tmp_path_factory.mktemp("research"), ACME), "research")
    run_document("docs/knowledge-cores.md", shell)
    assert (shell.cwd / "research.tgz").stat().st_size > 0


def test_observability(shell):
    run_document("docs/observability.md", shell)


def test_openai(shell):
    shell.env["TG_GATEWAY_TOKEN"] = "change-me"  # the line above started the stack with it
    run_document("docs/openai.md", shell)


def test_gateway_last(shell, history):
    """Runs last: its API keys close the open gateway."""
    made: list[str] = []

    def after(example: Example, ran: Ran) -> None:
        if example.command.startswith("tg-create-key"):
            made.append(ran.out.strip())
        if example.command.startswith("tg-create-key --user root"):
            shell.env["TRUSTGRAPH_TOKEN"] = made[-1]  # the export the doc shows
    run_document("docs/gateway.md", shell, after)
    assert len(made) == 3 and all(key.startswith("tg_") for key in made)
    key_id = made[1].split("_")[1]
    revoked = shell.run(f"tg-revoke-key {key_id}")  # the doc's last line, with a real id
    assert revoked.status == 0, revoked


# --- what holds without a stack ----------------------------------------------------------

RUN_HERE = {"README.md", "docs/cli.md", "docs/collections.md", "docs/evaluation.md",
            "docs/flows.md", "docs/prompts.md", "docs/observability.md",
            "docs/knowledge-cores.md", "docs/openai.md", "docs/gateway.md"}


def test_every_document_with_commands_has_its_run_here():
    runnable = {e.doc for path in documents() for e in examples(path)
                if exception(e) is None}
    assert runnable <= RUN_HERE, f"documents whose commands no test runs: {runnable - RUN_HERE}"


def test_every_exception_is_a_documented_command():
    shown = {(e.doc, e.command) for path in documents() for e in examples(path)}
    for doc, command in EXCEPTIONS:
        assert any(d == doc and re.match(re.escape(command) + r"(\s|$)", c)
                   for d, c in shown), f"{doc}: no command {command!r} any more"


def test_every_fenced_block_says_what_it_holds():
    problems = [p for path in documents() for p in unclassified(path)]
    assert not problems, "\n".join(problems)
