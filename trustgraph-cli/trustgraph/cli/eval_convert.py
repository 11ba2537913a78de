"""tg-eval's question files, and tg-eval-convert: question files from BEIR-style
qrels or SQuAD-style JSON.

A question file is JSON Lines, one question a line:

    {"question": "...", "expected": ["doc-id or title", ...], "answer": "reference"}

``expected`` names the documents that answer it (ids or titles, as loaded);
``answer`` (optional; a string or a list of acceptable strings) is a reference
answer; ``id`` (optional) names the question in the report.
"""
import argparse
import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PROG = "tg-eval-convert"


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    expected: tuple[str, ...]
    answers: tuple[str, ...] = field(default=())  # reference answers, when given


class QuestionFileError(ValueError):
    pass


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a file; a bad line is an error naming it."""
    questions = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                questions.append(_question(line, number))
    if not questions:
        raise QuestionFileError(f"{path}: no questions")
    return questions


def _question(line: str, number: int) -> Question:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as error:
        raise QuestionFileError(f"line {number}: not JSON: {error}") from None
    if not isinstance(item, dict) or not str(item.get("question") or "").strip():
        raise QuestionFileError(f"line {number}: needs a \"question\"")
    expected = item.get("expected", [])
    expected = [expected] if isinstance(expected, str) else expected
    if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
        raise QuestionFileError(f"line {number}: \"expected\" must be a list of document "
                                f"ids or titles")
    answers = item.get("answer") or []
    answers = [answers] if isinstance(answers, str) else answers
    return Question(str(item.get("id") or number), item["question"].strip(),
                    tuple(expected), tuple(str(a) for a in answers))


def line_of(question: str, expected: list[str], answers: list[str] | None = None,
            id: str | None = None) -> str:
    item: dict = {"question": question, "expected": expected}
    if answers:
        item["answer"] = answers[0] if len(answers) == 1 else answers
    if id is not None:
        item = {"id": id, **item}
    return json.dumps(item, ensure_ascii=False)


# -- BEIR: queries.jsonl + qrels/<split>.tsv (+ corpus.jsonl) ----------------------

def from_beir(queries: Path, qrels: Path, min_score: int = 1) -> Iterator[str]:
    """One line per query with judged documents (score >= ``min_score``)."""
    relevant: dict[str, list[str]] = {}
    with open(qrels, encoding="utf-8", newline="") as rows:
        for row in csv.reader(rows, delimiter="\t"):
            if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
                continue  # the header, or a blank line
            if int(row[2]) >= min_score:
                relevant.setdefault(row[0], []).append(row[1])
    with open(queries, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                query = json.loads(line)
                if str(query["_id"]) in relevant:
                    yield line_of(query["text"], relevant[str(query["_id"])],
                                  id=str(query["_id"]))


def beir_documents(corpus: Path, out: Path) -> int:
    """The corpus as text files named by document id (the title on the first line),
    for tg-load-text; returns how many."""
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(corpus, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                document = json.loads(line)
                name = str(document["_id"]).replace("/", "_")
                title = document.get("title") or ""
                (out / f"{name}.txt").write_text(
                    f"{title}\n\n{document['text']}" if title else document["text"],
                    encoding="utf-8")
                count += 1
    return count


# -- SQuAD: {"data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]} --------

def from_squad(path: Path) -> Iterator[str]:
    """One line per answerable question: the article's title is the expected document,
    its answers the references."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for article in data.get("data", []):
        for paragraph in article.get("paragraphs", []):
            for qa in paragraph.get("qas", []):
                answers = list(dict.fromkeys(a["text"] for a in qa.get("answers", [])))
                if qa.get("is_impossible") or not answers:
                    continue
                yield line_of(qa["question"], [article["title"]], answers, qa.get("id"))


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = argparse.ArgumentParser(prog=PROG, description=(
        "Write a tg-eval question file (JSON Lines, to stdout) from another format."))
    formats = arguments.add_subparsers(dest="format", required=True)
    beir = formats.add_parser("beir", help="BEIR: queries.jsonl and a qrels TSV")
    beir.add_argument("queries", type=Path)
    beir.add_argument("qrels", type=Path)
    beir.add_argument("--min-score", type=int, default=1,
                      help="lowest judgement that counts as relevant (default 1)")
    beir.add_argument("--corpus", type=Path, help="corpus.jsonl, to write as documents")
    beir.add_argument("--documents", type=Path,
                      help="with --corpus: folder to write one text file per document")
    squad = formats.add_parser("squad", help="SQuAD v1.1/v2.0 JSON")
    squad.add_argument("file", type=Path)
    return arguments.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        if args.format == "beir":
            lines = from_beir(args.queries, args.qrels, args.min_score)
            if args.corpus and args.documents:
                written = beir_documents(args.corpus, args.documents)
                print(f"{written} documents written to {args.documents}", file=sys.stderr)
        else:
            lines = from_squad(args.file)
        count = 0
        for line in lines:
            print(line)
            count += 1
    except (OSError, ValueError, KeyError) as error:
        print(f"{PROG}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(f"{count} questions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
