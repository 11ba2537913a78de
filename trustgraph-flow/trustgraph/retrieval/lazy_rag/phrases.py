"""What a question asks about, in words the graph can be checked against.

* ``windows``: every run of one to three words of the question that starts and ends
  on a content word ("Acme Rockets", "founded Acme Rockets", ...). Their entity IRIs
  (extraction's naming rule, ``entity_iri``), as written and with the last word
  singular, are the lexical seed candidates: a window that names an entity of the
  graph is an exact match of its label.
* ``key_terms``: the phrases confidence and missing information are judged on: the
  windows that matched an entity (longest first, not overlapping), then the runs of
  content words nothing matched.
* ``sub_questions``: the question split into the parts it asks separately ("When was
  X founded, and by whom?" asks two things).
"""
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from trustgraph.extract.vocabulary import entity_iri, singular

MAX_WINDOW = 3
# Words that ask rather than name (most are stop words already; these are not).
_ASKING = {"explain", "describe", "list", "name", "give", "show", "summarise", "summarize",
           "know", "happened"}
_WORD = re.compile(r"[^\W_]+(?:[+#'’][^\W_]*)*")
_SPLIT = re.compile(r"[?;!]+|\s*,?\s+and\s+(?=(?:who|whom|what|when|where|why|how|which|"
                    r"by whom|in what)\b)", re.IGNORECASE)


@cache
def _stopwords() -> frozenset[str]:
    return yake_stopwords() | _ASKING


def yake_stopwords() -> frozenset[str]:
    """YAKE's English list, the one the keyphrase extractor indexes with, read from
    YAKE's package data: importing YAKE (and networkx with it) would cost the serving
    process ~1 s of start-up for a word list."""
    spec = importlib.util.find_spec("yake")
    assert spec is not None and spec.submodule_search_locations, "yake is a dependency"
    package = Path(spec.submodule_search_locations[0])
    words = (package / "core" / "StopwordsList" / "stopwords_en.txt").read_text("utf-8")
    return frozenset(words.lower().split("\n"))


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def is_content(word: str) -> bool:
    return word.casefold() not in _stopwords() and any(c.isalpha() for c in word)


@dataclass(frozen=True)
class Window:
    start: int  # word index in the question
    end: int  # one past the last word
    text: str

    @property
    def iri(self) -> str | None:
        return entity_iri(self.text)

    @property
    def iris(self) -> list[str]:
        """The entities the window may name: as written, and with its last word
        singular ("cockatoos" names the entity "cockatoo" too: extraction names a
        common noun by its singular)."""
        head, _, last = self.text.rpartition(" ")
        names = [self.text, f"{head} {singular(last)}".strip()]
        return list(dict.fromkeys(i for i in map(entity_iri, names) if i))


def windows(question: str) -> list[Window]:
    """Every 1–3 word run starting and ending on a content word, longest first."""
    tokens = words(question)
    found = [Window(i, i + n, " ".join(tokens[i:i + n]))
             for n in range(MAX_WINDOW, 0, -1) for i in range(len(tokens) - n + 1)
             if is_content(tokens[i]) and is_content(tokens[i + n - 1])]
    return [w for w in found if w.iri]


@dataclass(frozen=True)
class KeyTerm:
    text: str
    matched: bool  # names an entity of the graph exactly


def key_terms(question: str, matched_iris: set[str]) -> list[KeyTerm]:
    """The windows naming entities in ``matched_iris`` (longest first, never
    overlapping), then each run of content words none of them covers, in order."""
    tokens, taken = words(question), set[int]()
    terms: list[tuple[int, KeyTerm]] = []
    for window in windows(question):
        span = set(range(window.start, window.end))
        if not matched_iris.isdisjoint(window.iris) and not span & taken:
            taken |= span
            terms.append((window.start, KeyTerm(window.text, True)))
    run: list[int] = []
    for i in [*range(len(tokens)), len(tokens)]:  # the sentinel ends the last run
        if i < len(tokens) and i not in taken and is_content(tokens[i]):
            run.append(i)
            continue
        if run:
            terms.append((run[0], KeyTerm(" ".join(tokens[j] for j in run), False)))
        run = []
    return [term for _, term in sorted(terms, key=lambda item: item[0])]


def sub_questions(question: str) -> list[str]:
    """The parts asked separately; the question itself when it asks one thing."""
    parts = [p.strip(" ,.") for p in _SPLIT.split(question) if p and p.strip(" ,.")]
    parts = [p for p in parts if any(is_content(w) for w in words(p))]
    return parts if len(parts) > 1 else [question.strip()]

