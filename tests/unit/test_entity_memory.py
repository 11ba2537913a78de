"""What entity-embeddings remembers (ingest/entity_memory.py): an entity's vector per
(user, collection), made from its richest text, for one model, bounded."""
from trustgraph.ingest.entity_memory import EntityMemory
from trustgraph.schema import EntityContext, Term

VECTOR = [0.0123457, -0.9876543, 0.5, 1.0]  # as the service sends them: 7 decimals


def entity(name: str, definition: str = "") -> EntityContext:
    return EntityContext(entity=Term.iri(f"http://ex/{name}"), label=name,
                         definition=definition)


def test_an_entity_is_recalled_in_its_own_scope_with_the_numbers_sent():
    memory = EntityMemory(10)
    memory.remember("ann", "notes", entity("cat"), VECTOR, "m")
    assert memory.recall("ann", "notes", entity("cat")) == VECTOR
    assert memory.recall("ann", "papers", entity("cat")) is None
    assert memory.recall("bob", "notes", entity("cat")) is None
    assert memory.recall("ann", "notes", entity("dog")) is None


def test_a_definition_is_richer_than_a_label_alone():
    memory = EntityMemory(10)
    memory.remember("ann", "notes", entity("cat"), VECTOR, "m")
    assert memory.recall("ann", "notes", entity("cat", "a small feline")) is None
    memory.remember("ann", "notes", entity("cat", "a small feline"), [1.0, 0.0], "m")
    assert memory.recall("ann", "notes", entity("cat")) == [1.0, 0.0]
    assert memory.recall("ann", "notes", entity("cat", "another definition")) == [1.0, 0.0]


def test_another_model_s_vectors_are_forgotten():
    memory = EntityMemory(10)
    memory.remember("ann", "notes", entity("cat"), VECTOR, "old")
    memory.remember("ann", "notes", entity("dog"), VECTOR, "new")
    assert memory.model == "new" and len(memory) == 1
    assert memory.recall("ann", "notes", entity("cat")) is None


def test_the_least_recently_used_go_first():
    memory = EntityMemory(2)
    for name in ("a", "b"):
        memory.remember("u", "c", entity(name), VECTOR, "m")
    memory.recall("u", "c", entity("a"))  # used: b is now the oldest
    memory.remember("u", "c", entity("c"), VECTOR, "m")
    assert [memory.recall("u", "c", entity(n)) is not None for n in "abc"] == [
        True, False, True]
    nothing = EntityMemory(0)
    nothing.remember("u", "c", entity("a"), VECTOR, "m")
    assert nothing.recall("u", "c", entity("a")) is None
