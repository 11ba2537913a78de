"""The LLM-free extractor: key phrases become entities joined by co-occurrence edges,
the same text always giving the same triples."""
import itertools
import os
import subprocess
import sys

import pytest

from trustgraph.extract.keyphrase import KeyphraseExtractor, co_occurrence_weights
from trustgraph.extract.vocabulary import (
    CO_OCCURS,
    DEFINITION,
    IN_DOCUMENT,
    LABEL,
    MENTIONED_IN,
    chunk_iri,
    document_iri,
    entity_iri,
)
from trustgraph.schema import Chunk, DocumentRef, Term, Triple

TEXT = (
    "Harbour Robotics builds autonomous underwater vehicles for offshore wind farms. "
    "The underwater vehicles inspect turbine foundations and subsea cables. "
    "Harbour Robotics was founded in Bergen by Ingrid Solberg, a marine engineer. "
    "Each autonomous underwater vehicle maps subsea cables with sonar and sends the "
    "inspection data to the wind farm operator. Offshore wind farms in the North Sea "
    "use the inspection data to plan cable repairs.")

OTHER = (
    "Ingrid Solberg studied marine engineering in Trondheim. Before Harbour Robotics "
    "she designed sonar systems for research vessels in the North Sea.")


def chunk(text: str = TEXT, document: str = "reports/2024 wind.txt", index: int = 0,
          title: str = "Wind report") -> Chunk:
    return Chunk(document=DocumentRef(id=document, user="u", collection="c", title=title),
                 id=f"{document}/c{index}", index=index, text=text)


@pytest.fixture(scope="module")
def extractor():
    extractor = KeyphraseExtractor(phrases=8)
    yield extractor
    extractor.close()


def by_predicate(triples, predicate):
    return [t for t in triples if t.p.i == predicate]


def test_key_phrases_are_the_texts_topics(extractor):
    phrases = [p.lower() for p in extractor.key_phrases(TEXT)]
    assert len(phrases) == 8
    assert {"harbour robotics", "underwater vehicles", "ingrid solberg"} <= set(phrases)


def test_a_misplaced_window_over_a_chosen_phrase_is_skipped(extractor):
    phrases = [p.lower() for p in extractor.key_phrases(TEXT)]
    assert "robotics builds" not in phrases  # straddles "harbour robotics"
    assert "robotics" not in phrases  # never apart from "harbour robotics"


def test_phrases_with_a_stop_word_inside_are_kept_only_as_names():
    phrases = KeyphraseExtractor(phrases=8, max_words=3).key_phrases(
        "The Bank of England raised rates. The Bank of England said rates were rising "
        "because prices were rising. Analysts said the rise was expected by markets.")
    assert "Bank of England" in phrases
    assert not any(" were " in f" {p.lower()} " or " was " in f" {p.lower()} "
                   for p in phrases)


def test_numbers_and_codes_are_not_entities(extractor):
    phrases = extractor.key_phrases("In 2024 the 42 units of model X9 shipped. "
                                    "In 2024 the 42 units of model X9 shipped again.")
    assert not any(sum(c.isalpha() for c in p) < 2 for p in phrases)


def test_every_entity_is_labelled_and_linked_to_its_chunk(extractor):
    source = chunk()
    triples, entities = extractor.graph(source).records()
    node = Term.iri(chunk_iri(source.id))
    labels = {t.s: t.o.v for t in by_predicate(triples.triples, LABEL)}
    mentioned = {t.s for t in by_predicate(triples.triples, MENTIONED_IN) if t.o == node}
    assert len(entities.entities) == 8
    for entity in entities.entities:
        assert entity.entity.i == entity_iri(entity.label)
        assert labels[entity.entity] == entity.label
        assert entity.entity in mentioned
        assert entity.definition == ""
    assert triples.chunk_id == entities.chunk_id == source.id
    assert triples.document == entities.document == source.document


def test_every_two_entities_of_a_chunk_co_occur_once(extractor):
    triples, entities = extractor.graph(chunk()).records()
    edges = by_predicate(triples.triples, CO_OCCURS)
    iris = sorted(e.entity.i for e in entities.entities)
    assert [(t.s.i, t.o.i) for t in edges] == list(itertools.combinations(iris, 2))
    assert all(t.s.i < t.o.i for t in edges)


def test_the_chunk_belongs_to_its_document_and_predicates_are_labelled(extractor):
    source = chunk()
    triples = set(extractor.graph(source).records()[0].triples)
    document = Term.iri(document_iri(source.document.id))
    node = Term.iri(chunk_iri(source.id))
    assert Triple(s=node, p=Term.iri(IN_DOCUMENT), o=document) in triples
    assert Triple(s=document, p=Term.iri(LABEL), o=Term.literal("Wind report")) in triples
    labelled = {t.s.i for t in triples if t.p.i == LABEL}
    assert {CO_OCCURS, MENTIONED_IN, IN_DOCUMENT} <= labelled
    assert DEFINITION not in labelled  # not used by this extractor
    assert len(triples) == len(extractor.graph(source).records()[0].triples)  # no repeats


def test_the_same_chunk_gives_the_same_triples(extractor):
    first = extractor.graph(chunk()).records()
    again = KeyphraseExtractor(phrases=8).graph(chunk()).records()
    assert first == again


def test_the_same_triples_whatever_the_hash_seed(extractor):
    """Nothing depends on set or dict order: another process with another hash seed
    extracts exactly the same."""
    script = ("import sys; from trustgraph.extract.keyphrase import KeyphraseExtractor; "
              "print(KeyphraseExtractor(phrases=8).key_phrases(sys.stdin.read()))")
    outputs = {subprocess.run([sys.executable, "-c", script], input=TEXT + " " + OTHER,
                              capture_output=True, text=True, check=True,
                              env=os.environ | {"PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2")}
    assert outputs == {repr(extractor.key_phrases(TEXT + " " + OTHER)) + "\n"}


def test_a_chunk_without_key_phrases_gives_nothing(extractor):
    assert extractor.graph(chunk(text="")).records() is None
    assert extractor.graph(chunk(text="the of and, to it: is.")).records() is None


async def test_extraction_runs_off_the_event_loop(extractor):
    graph = await extractor.extract(chunk())
    assert graph.records() == extractor.graph(chunk()).records()


def test_co_occurrence_weight_is_the_number_of_chunks_shared(extractor):
    triples = []
    for index, text in enumerate([TEXT, OTHER, TEXT + " " + OTHER]):
        triples += extractor.graph(chunk(text=text, index=index)).records()[0].triples
    weights = co_occurrence_weights(triples)
    edges = {(t.s, t.o) for t in by_predicate(triples, CO_OCCURS)}
    assert set(weights) >= edges
    for (s, o), weight in weights.items():
        chunks_of = [{t.o for t in by_predicate(triples, MENTIONED_IN) if t.s == e}
                     for e in (s, o)]
        assert weight == len(chunks_of[0] & chunks_of[1])
    assert max(weights.values()) >= 2  # some pair is in more than one chunk


def test_lazy_rag_reads_the_same_stop_words_as_the_extractor_without_importing_yake():
    import yake

    from trustgraph.retrieval.lazy_rag.phrases import yake_stopwords
    assert yake_stopwords() == yake.KeywordExtractor(lan="en").stopword_set
    code = ("import sys; from trustgraph.retrieval.lazy_rag.service import SPEC; "
            "from trustgraph.retrieval.lazy_rag.phrases import yake_stopwords; "
            "yake_stopwords(); print(sorted({'yake', 'networkx', 'igraph', 'leidenalg'} "
            "& set(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    assert loaded == "[]\n"  # the serving process leaves them to the ones that need them
