"""tg-eval: how well the platform answers your questions, measured through the
public API (docs/evaluation.md).

    tg-eval questions.jsonl -C papers --mode document
    tg-eval questions.jsonl -C papers --compare retrieval=vector retrieval=hybrid \\
        "retrieval=hybrid,rerank=true" --out report --min-recall-at-1 0.7

Each setting (the options, or each ``--compare`` spec on top of them) asks every
question and gets one row: Recall@1/5/10, MRR, nDCG@10, cited-document precision,
time to sources and to first token (p50/p95), tokens, and with reference answers
exact match and token F1 (and with ``--judge`` the LLM judge's faithfulness and
relevance), and under it why questions failed (each error, counted). The table is
printed; ``--out PREFIX`` writes PREFIX.json (every question's scores too) and
PREFIX.md. The exit status is 2 when a setting misses a ``--min-*``/``--max-*``
threshold, so a CI job can hold a collection to a bar, and 1 when every question of
a setting failed (it measured nothing).
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .common import EXIT_ERROR, parser, positive, run, scope_options
from .eval_convert import Question, read_questions
from .eval_run import run_setting, summary

PROG = "tg-eval"
EXIT_BELOW_THRESHOLD = 2
# (option, measure, at least (True) or at most)
THRESHOLDS = (("min_recall_at_1", "recall@1", True), ("min_recall_at_5", "recall@5", True),
              ("min_mrr", "mrr", True), ("min_ndcg", "ndcg", True), ("min_f1", "f1", True),
              ("max_sources_p50_ms", "to_sources_p50_ms", False))
COLUMNS = (("R@1", "recall@1"), ("R@5", "recall@5"), ("R@10", "recall@10"), ("MRR", "mrr"),
           ("nDCG@10", "ndcg"), ("cited P", "cited_precision"),
           ("sources p50 ms", "to_sources_p50_ms"), ("p95", "to_sources_p95_ms"),
           ("first token p50 ms", "to_first_token_p50_ms"), ("p95", "to_first_token_p95_ms"),
           ("tokens in/out", None), ("EM", "exact_match"), ("F1", "f1"),
           ("faithful", "faithfulness"), ("relevant", "relevance"), ("errors", "errors"))


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, "Measure retrieval and answers on a question "
                                           "file (JSON Lines: question, expected, answer)."))
    arguments.add_argument("questions", type=Path, help="the question file")
    arguments.add_argument("--mode", default="document",
                           choices=("document", "graph", "lazy", "agent"))
    arguments.add_argument("--retrieval", choices=("vector", "lexical", "hybrid"),
                           help="document mode: how chunks are found (default: the stack's)")
    arguments.add_argument("--rerank", action="store_true",
                           help="document mode: rerank the chunks found through the LLM")
    arguments.add_argument("--doc-limit", type=positive, default=10,
                           help="document mode: chunks retrieved (default %(default)s)")
    arguments.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                           help="any other field of the query body (repeatable)")
    arguments.add_argument("--compare", nargs="+", metavar="SPEC",
                           help="settings to run side by side, each KEY=VALUE[,KEY=VALUE…] "
                                "over the options (e.g. collection=a collection=b)")
    arguments.add_argument("-n", "--limit", type=positive, help="only the first N questions")
    arguments.add_argument("-c", "--concurrency", type=positive, default=4,
                           help="questions asked at once (default %(default)s)")
    arguments.add_argument("--judge", action="store_true",
                           help="grade each answer with the eval-judge prompt (LLM calls)")
    arguments.add_argument("--out", type=Path, metavar="PREFIX",
                           help="write PREFIX.json and PREFIX.md")
    arguments.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    for option, measure, _ in THRESHOLDS:
        arguments.add_argument("--" + option.replace("_", "-"), type=float,
                               metavar="X", help=f"exit {EXIT_BELOW_THRESHOLD} if a "
                                                 f"setting's {measure} is "
                                                 f"{'below' if _ else 'above'} X")
    return arguments.parse_args(argv)


def value(text: str) -> Any:
    """A KEY=VALUE value: JSON when it parses (true, 10, "x"), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def pairs(specs: list[str]) -> dict[str, Any]:
    result = {}
    for spec in specs:
        key, sep, text = spec.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{spec!r} is not KEY=VALUE")
        result[key.strip().replace("-", "_")] = value(text.strip())
    return result


def base_body(args: argparse.Namespace) -> dict[str, Any]:
    """The query body's fields but the question. No ``-U``: no ``user``, so the
    gateway asks for the key's own user."""
    body: dict[str, Any] = {"mode": args.mode, "collection": args.collection,
                            "flow": args.flow_id}
    if args.user is not None:
        body["user"] = args.user
    if args.mode == "document":
        body["doc_limit"] = args.doc_limit
        if args.retrieval:
            body["retrieval"] = args.retrieval
        if args.rerank:
            body["rerank"] = True
    return {**body, **pairs(args.option)}


def settings(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """(label, query body) per setting."""
    base = base_body(args)
    if not args.compare:
        return [(describe(base), base)]
    return [(spec, _with_mode_defaults({**base, **pairs(spec.split(","))}))
            for spec in args.compare]


def _with_mode_defaults(body: dict[str, Any]) -> dict[str, Any]:
    """A compared setting that changes the mode drops the document-only options."""
    if body.get("mode") != "document":
        body = {k: v for k, v in body.items() if k not in ("doc_limit", "retrieval", "rerank")}
    return body


def describe(body: dict[str, Any]) -> str:
    shown = {k: v for k, v in body.items() if k not in ("user", "flow", "doc_limit")}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


async def evaluate(args: argparse.Namespace, questions: list[Question]
                   ) -> list[dict[str, Any]]:
    runs = []
    for label, body in settings(args):
        with tqdm(total=len(questions), desc=label[:40], unit="q", file=sys.stderr,
                  disable=args.quiet) as bar:
            scores = await run_setting(args.url, args.token, questions, body,
                                       args.concurrency, args.judge, lambda: bar.update(1))
        runs.append({"setting": label, "body": body, "summary": summary(scores),
                     "questions": scores})
    return runs


def cell(result: dict[str, Any], key: str | None) -> str:
    if key is None:
        return f"{result['in_token']}/{result['out_token']}"
    figure = result.get(key)
    if figure is None:
        return "–"
    if key.endswith("_ms"):
        return f"{figure:.1f}"
    return str(figure) if isinstance(figure, int) else f"{figure:.3f}"


def table(runs: list[dict[str, Any]]) -> str:
    """The settings as one Markdown table, the columns no setting has left out."""
    columns = [(name, key) for name, key in COLUMNS
               if key is None or any(r["summary"].get(key) is not None for r in runs)]
    lines = ["| setting | questions | " + " | ".join(n for n, _ in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for r in runs:
        lines.append(f"| {r['setting']} | {r['summary']['questions']} | "
                     + " | ".join(cell(r["summary"], key) for _, key in columns) + " |")
    return "\n".join(lines + failures(runs))


def failures(runs: list[dict[str, Any]]) -> list[str]:
    """Under the table, why questions failed: each setting's errors, counted."""
    lines = []
    for r in runs:
        for error, count in r["summary"]["failures"].items():
            lines.append(f"{r['setting']}: {count} × {error}")
    return ["", "Failed questions:", *lines] if lines else []


def misses(args: argparse.Namespace, runs: list[dict[str, Any]]) -> list[str]:
    found = []
    for option, measure, at_least in THRESHOLDS:
        bar = getattr(args, option)
        if bar is None:
            continue
        for r in runs:
            figure = r["summary"].get(measure)
            if figure is None or (figure < bar if at_least else figure > bar):
                found.append(f"{r['setting']}: {measure} {figure} "
                             f"{'<' if at_least else '>'} {bar}")
    return found


def write(prefix: Path, runs: list[dict[str, Any]], text: str) -> None:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(runs, indent=1, ensure_ascii=False),
                                      encoding="utf-8")
    Path(f"{prefix}.md").write_text(text + "\n", encoding="utf-8")


async def command(args: argparse.Namespace) -> int:
    questions = read_questions(args.questions)[:args.limit]
    runs = await evaluate(args, questions)
    whose = args.user if args.user is not None else "the key's user"
    text = (f"tg-eval: {len(questions)} questions from {args.questions}, "
            f"collection {args.collection} of {whose}\n\n{table(runs)}")
    print(text)
    if args.out:
        write(args.out, runs, text)
    if failed := [r["setting"] for r in runs
                  if 0 < r["summary"]["questions"] == r["summary"]["errors"]]:
        print(f"{PROG}: every question failed: {'; '.join(failed)} (why: under the table)",
              file=sys.stderr)
        return EXIT_ERROR
    if missed := misses(args, runs):
        for line in missed:
            print(f"{PROG}: below the bar: {line}", file=sys.stderr)
        return EXIT_BELOW_THRESHOLD
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    status: list[int] = []

    async def go() -> None:
        status.append(await command(args))
    return run(PROG, go()) or (status[0] if status else 0)


if __name__ == "__main__":
    sys.exit(main())
