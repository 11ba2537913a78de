"""LLM-free extraction, as LazyGraphRAG indexes: the key phrases of a chunk become
entities, and every two key phrases of the same chunk are joined by a ``co-occurs``
edge.

Key phrases come from YAKE, a statistical extractor that needs no model and no
download (its stop word lists ship in the package). The same text always gives the
same phrases, so a redelivered or re-loaded chunk writes the same triples again,
which the triples store keeps once.

How strongly two entities are related is how many chunks they co-occur in: the
number of chunks the ``co-occurs`` triple was found in, which is also the number of
chunks both are ``mentioned-in`` (see ``co_occurrence_weights``).
"""
import asyncio
import itertools
import re
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import yake

from trustgraph.schema import Chunk, Term, Triple

from .graph import ChunkGraph
from .vocabulary import CO_OCCURS, MENTIONED_IN, slug


class KeyphraseExtractor:
    def __init__(self, phrases: int = 10, max_words: int = 2, language: str = "en") -> None:
        self.phrases = phrases
        # Phrases that are dropped by the filter below leave room for others.
        self._yake = yake.KeywordExtractor(lan=language, n=max_words, top=phrases * 3)
        self._stopwords = self._yake.stopword_set
        # YAKE is pure Python and holds the GIL: one thread keeps it off the event
        # loop; more would only contend. Run more replicas to use more cores.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="keyphrase")

    async def extract(self, chunk: Chunk) -> ChunkGraph:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, self.graph, chunk)

    def graph(self, chunk: Chunk) -> ChunkGraph:
        graph = ChunkGraph(chunk)
        entities = [entity for phrase in self.key_phrases(chunk.text)
                    if (entity := graph.entity(phrase)) is not None]
        for s, o in itertools.combinations(sorted(e.value for e in entities), 2):
            graph.add(Term.iri(s), CO_OCCURS, Term.iri(o))
        return graph

    def key_phrases(self, text: str) -> list[str]:
        """Up to ``phrases`` key phrases, best first, one per entity IRI."""
        chosen: dict[str, str] = {}
        counts: dict[str, int] = {}
        for phrase, _ in self._yake.extract_keywords(text):
            key = slug(phrase)
            if not key or key in chosen or not self._acceptable(phrase):
                continue
            counts[key] = _occurrences(phrase, text)
            if any(_straddles(key, other)
                   or _within(key, other) and counts[key] <= counts[other]
                   for other in chosen):
                continue
            chosen[key] = phrase
            if len(chosen) == self.phrases:
                break
        return list(chosen.values())

    def _acceptable(self, phrase: str) -> bool:
        """Not a number or a code, and no stop word inside ("Google is acquiring")
        unless it reads as a name ("Bank of England")."""
        if sum(c.isalpha() for c in phrase) < 2:
            return False
        words = phrase.split()
        if any(w.lower() in self._stopwords for w in words[1:-1]):
            return words[0][:1].isupper() and words[-1][:1].isupper()
        return True

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


def _occurrences(phrase: str, text: str) -> int:
    words = r"\s+".join(map(re.escape, phrase.split()))
    return len(re.findall(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE))


def _within(key: str, longer: str) -> bool:
    """Whether slug ``key`` is a run of whole words of slug ``longer``."""
    return key != longer and f"-{key}-" in f"-{longer}-"


def _straddles(key: str, other: str) -> bool:
    """Whether two slugs share words without one holding the other, like "harbour
    robotics" and "robotics builds": the lower-ranked one is a misplaced window."""
    return (not set(key.split("-")).isdisjoint(other.split("-"))
            and not _within(key, other) and not _within(other, key))


def co_occurrence_weights(mentions: Iterable[Triple]) -> Counter[tuple[Term, Term]]:
    """The weight of every co-occurrence edge, from ``mentioned-in`` triples (one
    pattern query: ``p = mentioned-in``): the number of chunks both entities are
    mentioned in, keyed by (subject, object) as the ``co-occurs`` triple has them."""
    by_chunk: dict[Term, set[Term]] = {}
    for triple in mentions:
        if triple.p.i == MENTIONED_IN:
            by_chunk.setdefault(triple.o, set()).add(triple.s)
    weights: Counter[tuple[Term, Term]] = Counter()
    for entities in by_chunk.values():
        ordered = sorted(entities, key=lambda term: term.value)
        weights.update(itertools.combinations(ordered, 2))
    return weights
