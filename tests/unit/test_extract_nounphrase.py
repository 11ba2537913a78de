"""The default LLM-free extractor (extract/nounphrase.py): noun phrases are the
entities, the words joining two of them in a sentence the relation, and the
document's title an entity of every chunk of it. The tagger is spaCy's small English
model from its PyPI wheel, the real one."""
import subprocess
import sys

import pytest

from trustgraph.extract.nounphrase import NounPhraseExtractor
from trustgraph.extract.vocabulary import (
    DEFINITION,
    HEADING_SEPARATOR,
    LABEL,
    MENTIONED_IN,
    chunk_iri,
    entity_iri,
)
from trustgraph.schema import Chunk, DocumentRef, Term

COCKATOO = ("A cockatoo is any of the 22 species of parrots belonging to the family "
            "Cacatuidae, the only family in the superfamily Cacatuoidea, native to "
            "Australasia. Along with the Psittacoidea, they make up the order "
            "Psittaciformes.")


@pytest.fixture(scope="module")
def extractor():
    found = NounPhraseExtractor()
    yield found
    found.close()


def chunk_of(text: str, title: str = "Cockatoo", index: int = 0,
             headings: list[str] | None = None) -> Chunk:
    return Chunk(document=DocumentRef(id="cockatoo", user="u", collection="c", title=title),
                 id=f"cockatoo/c{index}", index=index, text=text, headings=headings)


def statements(graph) -> set[tuple[str, str, str]]:
    """The graph's facts as a reader sees them: labels, not IRIs; no provenance."""
    labels = {t.s.i: t.o.v for t in graph.triples if t.p.i == LABEL}
    return {(labels.get(t.s.i, t.s.i), labels.get(t.p.i, t.p.i),
             labels.get(t.o.i, t.o.i) if t.o.is_iri else t.o.v)
            for t in graph.triples if t.p.i not in (LABEL, MENTIONED_IN)
            and not t.s.i.startswith("urn:tg:chunk:")}


def test_entities_are_noun_phrases_not_verb_phrases(extractor):
    graph = extractor.graph(chunk_of(
        "The guild began building the Vellmar Bridge in 1402. Merchants of the guild "
        "crossed the bridge daily.", title="Vellmar guild"))
    labels = {e.label for e in graph.entities.values()}
    assert {"Vellmar Bridge", "merchant", "bridge"} <= labels
    assert not {"guild began", "guild began building", "crossed"} & labels
    # "the guild" is the document's subject: its words are the title's.
    assert ("Vellmar guild", "began building", "Vellmar Bridge") in statements(graph)


def test_sentences_become_worded_relations_and_the_title_is_their_subject(extractor):
    facts = statements(extractor.graph(chunk_of(COCKATOO)))
    assert ("Cockatoo", "is any of the 22 species of", "parrot") in facts
    assert ("parrot", "belonging to", "family Cacatuidae") in facts
    # "they" stands for the document's subject.
    assert ("Cockatoo", "make up", "order Psittaciformes") in facts


def test_the_title_is_an_entity_defined_by_the_documents_first_sentence(extractor):
    graph = extractor.graph(chunk_of(COCKATOO))
    title = Term.iri(entity_iri("Cockatoo"))
    first = COCKATOO.split(". ")[0] + "."
    assert graph.entities[title].definition == first
    assert any(t.s == title and t.p.i == DEFINITION and t.o.v == first for t in graph.triples)
    # A later chunk names the title entity (label, mentioned in it) but sends no entity
    # record for it: its vector stays the definition's, whichever chunk lands last.
    later = extractor.graph(chunk_of("It nests in hollow trees.", index=3))
    assert title not in later.entities and title in later.named
    assert ("Cockatoo", "nests in", "hollow tree") in statements(later)


def test_a_chunk_with_headings_is_labelled_with_its_heading_path(extractor):
    graph = extractor.graph(chunk_of("It nests in hollow trees.", index=2,
                                     headings=["Cockatoo", "Breeding"]))
    triples, _ = graph.records()
    node = Term.iri(chunk_iri("cockatoo/c2"))
    assert any(t.s == node and t.p.i == LABEL
               and t.o.v == HEADING_SEPARATOR.join(["Cockatoo", "Breeding"])
               for t in triples.triples)


def test_text_without_nouns_gives_only_the_title(extractor):
    graph = extractor.graph(chunk_of("It is, and was.", index=1))
    assert [e.i for e in graph.named] == [entity_iri("Cockatoo")]
    assert extractor.graph(chunk_of("1234 5678", title="")).records() is None


def test_the_entities_per_chunk_are_capped():
    few = NounPhraseExtractor(phrases=3)
    try:
        assert len(few.graph(chunk_of(COCKATOO)).named) == 3
    finally:
        few.close()


def test_the_same_text_gives_the_same_triples_in_any_process():
    code = ("import sys; from tests.unit.test_extract_nounphrase import chunk_of, COCKATOO;"
            "from trustgraph.extract.nounphrase import NounPhraseExtractor;"
            "g = NounPhraseExtractor().graph(chunk_of(COCKATOO));"
            "print(sorted(t.model_dump_json() for t in g.triples))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}, check=True).stdout
            for seed in ("1", "2")}
    assert len(runs) == 1


def test_only_the_first_entities_are_sent_for_vectors():
    few = NounPhraseExtractor(embedded=2)
    try:
        graph = few.graph(chunk_of(COCKATOO))
        assert [e.label for e in graph.entities.values()] == ["Cockatoo", "22 species"]
        assert len(graph.named) > 2
    finally:
        few.close()


def test_a_sentence_without_a_relation_says_what_the_subject_mentions(extractor):
    facts = statements(extractor.graph(chunk_of(
        "Possible states: CORO_CREATED, CORO_RUNNING and CORO_CLOSED.", index=1,
        title="inspect.getcoroutinestate")))
    # The small tagger reads the states as one name here: one phrase of the line.
    assert facts == {("inspect.getcoroutinestate", "mentions", "Possible state")}


def test_listed_subjects_share_a_relation_and_each_clause_has_its_own(extractor):
    facts = statements(extractor.graph(chunk_of(
        "Neil Armstrong and Buzz Aldrin walked on the Moon while Michael Collins "
        "orbited in the command module Columbia.", title="")))
    assert facts == {("Neil Armstrong", "walked on", "Moon"),
                     ("Buzz Aldrin", "walked on", "Moon"),
                     ("Michael Collins", "orbited in", "command module Columbia")}
