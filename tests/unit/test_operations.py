"""A service of several operations declares them once, in its request record's
``operation``; the processor's table of handlers and the gateway row's permissions
are refused unless they name each of those operations, and only those."""
import pytest

from trustgraph.config.service import CONFIG_OPERATIONS, KEYS_OPERATIONS
from trustgraph.gateway.core.services import SERVICES
from trustgraph.librarian import core as documents
from trustgraph.librarian.service import OPERATIONS as LIBRARIAN_OPERATIONS
from trustgraph.schema import ConfigRequest, CoreRequest, KeysRequest, LibrarianRequest
from trustgraph.schema.operations import operations_of, per_operation
from trustgraph.storage.triples import core as triples
from trustgraph.storage.vectors import core as vectors


def test_a_table_must_name_every_declared_operation_and_no_other():
    assert operations_of(CoreRequest) == ("count", "export", "import")
    assert operations_of(SERVICES["graph-rag"].request_model) == ()
    with pytest.raises(TypeError) as failure:
        per_operation(CoreRequest, {"count": 1, "purge": 2}, "the test's table")
    assert str(failure.value) == ("the test's table: missing export, import; not declared "
                                  "by CoreRequest: purge (the operations are "
                                  "CoreRequest.operation's)")
    table = {"count": 1, "export": 2, "import": 3}
    assert per_operation(CoreRequest, table, "the test's table") is table


@pytest.mark.parametrize("model, table", [
    (LibrarianRequest, LIBRARIAN_OPERATIONS), (ConfigRequest, CONFIG_OPERATIONS),
    (KeysRequest, KEYS_OPERATIONS), (CoreRequest, documents.OPERATIONS),
    (CoreRequest, vectors.OPERATIONS), (CoreRequest, triples.OPERATIONS)])
def test_every_declared_operation_has_a_handler_and_a_permission(model, table):
    declared = set(operations_of(model))
    assert set(table) == declared
    for row in SERVICES.values():
        if row.request_model is model:
            assert set(row.permissions()) == declared, row.name
