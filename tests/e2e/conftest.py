"""The e2e modules that only load and look share one ``tg-start`` running the
ingestion pipeline: a stack's start costs ~15 s, and these modules each keep to their
own user and collection, so they cannot see each other's documents."""
import pytest

from tests.support.stack import Stack

INGESTION = ["config", "librarian", "decoder", "embeddings", "chunk-embeddings", "extract",
             "entity-embeddings", "triples-store", "vector-store", "gateway"]


@pytest.fixture(scope="session")
def ingestion_stack():
    with Stack(processors=INGESTION, startup_timeout=120) as stack:
        yield stack
