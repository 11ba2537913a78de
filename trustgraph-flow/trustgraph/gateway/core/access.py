"""Who may do what (DESIGN §6): the one function every request to a service passes
through (``authorize``, in ``Dispatcher.frames``), whatever route or transport
carried it, reading the permission in the service's row (services.py; roles in
permissions.py).

A request acts for the caller's user: naming none, it is given that user; naming
another is refused (403 ``forbidden``) unless the caller is an admin, who acts for
others (logged as such). The user is a request's ``user`` field, which every request
about a user's data has (stores, RAG, agent sessions, the librarian, loads, LazyRAG);
the stores scope every query by it.

docs/gateway.md has the rows' permissions as a table; ``tests/unit/test_gateway_access.py``
keeps the two in step.
"""
import logging

from trustgraph.schema import Record, Role

from .caller import Caller
from .errors import GatewayError
from .permissions import INTERNAL, Permission
from .services import SERVICES, ServiceRow

log = logging.getLogger(__name__)


def permission(service: str, operation: str | None = None) -> Permission:
    """What ``service`` (and ``operation``, for a service of several) needs; a service
    or operation the gateway does not serve needs what nobody has."""
    row = SERVICES.get(service)
    return row.permission(operation) if row is not None else INTERNAL


def may(caller: Caller, service: str, operation: str | None = None) -> bool:
    """Whether ``caller``'s role may use ``service`` (``operation``) at all."""
    return caller.role in permission(service, operation).roles


def allowed(role: Role | None) -> dict[str, frozenset[str] | None]:
    """What ``role`` may use: service → the operations it may (None: the service has
    none, it may use all of it). For a client to offer only what will be allowed
    (the MCP server's tools, the workbench's views)."""
    result: dict[str, frozenset[str] | None] = {}
    for name, row in SERVICES.items():
        if isinstance(row.needs, Permission):
            if role in row.needs.roles:
                result[name] = None
        elif operations := frozenset(op for op, p in row.needs.items() if role in p.roles):
            result[name] = operations
    return result


def authorize(caller: Caller, row: ServiceRow, record: Record) -> tuple[Record, Permission]:
    """``record`` as ``caller`` may send it to ``row``'s service, and what the service
    needs; or the 403 saying why not. The role must be given the service (its
    operation) by the row, and the request acts for the caller's user (filled in when
    it names none)."""
    # Looked for in the fields first: a missing attribute costs pydantic a slow path.
    fields = type(record).model_fields
    operation = getattr(record, "operation") if "operation" in fields else None  # noqa: B009
    needs = row.permission(operation)
    if caller.role not in needs.roles:
        what = f"{row.name} {operation}" if operation else row.name
        raise forbidden(f"role {caller.role or 'none'!r} may not use {what}")
    if "user" not in fields:
        return record, needs
    named = getattr(record, "user") if "user" in record.model_fields_set else None  # noqa: B009
    user = acts_for(caller, named, row.name)
    return (record if named == user else record.model_copy(update={"user": user})), needs


def acts_for(caller: Caller, named: str | None, what: str = "") -> str:
    """The user a request of ``caller`` naming ``named`` (None: none) acts for, or the
    403 when it may not: the caller's own user, or, for an admin, anyone's."""
    if named is None or named == caller.user:
        return caller.user
    if caller.role != "admin":
        raise forbidden(f"this key acts for user {caller.user!r}, not {named!r}")
    if caller.via != "open":  # an open gateway's callers are all the same admin
        log.info("admin %s (%s) acts for user %r: %s", caller.user,
                 caller.key_id or caller.via, named, what)
    return named


def forbidden(message: str) -> GatewayError:
    return GatewayError("forbidden", message, 403)
