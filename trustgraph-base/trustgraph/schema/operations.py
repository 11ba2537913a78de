"""The operations of a service of several (the librarian, config, keys, the knowledge-core
services), declared once: the ``operation`` field of its request record, a ``Literal``
beside the record.

Two tables are keyed by those names, each where its readers are: the processor's
(operation → the function that does it, beside the handlers) and the gateway's
(operation → who may ask for it, in the service's row). Each is built through
``per_operation``, which refuses a table that leaves out a declared operation or names
one that is not declared, when the module defining it is imported: an operation added
to the record without a handler or a permission stops the process (and every test),
not a request."""
from collections.abc import Mapping
from typing import TypeVar, get_args

from .record import Record

K = TypeVar("K", bound=str)
V = TypeVar("V")


def operations_of(model: type[Record]) -> tuple[str, ...]:
    """The operations ``model`` declares, in declared order; none for a request record
    without an ``operation`` field (a service of one operation)."""
    field = model.model_fields.get("operation")
    return get_args(field.annotation) if field is not None else ()


def per_operation(model: type[Record], table: Mapping[K, V], what: str) -> Mapping[K, V]:
    """``table`` (an entry per operation), checked to have one for every operation
    ``model`` declares and none for any other; ``what`` names the table in the error."""
    declared = operations_of(model)
    missing = [operation for operation in declared if operation not in table]
    unknown = [operation for operation in table if operation not in declared]
    if missing or unknown:
        problems = [f"missing {', '.join(missing)}" if missing else "",
                    f"not declared by {model.__name__}: {', '.join(unknown)}" if unknown
                    else ""]
        raise TypeError(f"{what}: {'; '.join(p for p in problems if p)} (the operations "
                        f"are {model.__name__}.operation's)")
    return table
