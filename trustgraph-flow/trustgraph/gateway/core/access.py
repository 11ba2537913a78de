"""Who may do what (DESIGN §6): the one table of services and their operations × roles,
and the one function every request to a service passes through (``authorize``, in
``Dispatcher.frames``), whatever route or transport carried it.

Roles: ``admin`` may do everything, for any user; ``user`` reads and writes its own
data and reads the shared configuration (prompts, tools); ``reader`` asks and
searches its own data. A request acts for the caller's user: naming none, it is
given that user; naming another is refused (403 ``forbidden``) unless the caller is
an admin, who acts for others (logged as such). The user is a request's ``user``
field, which every request about a user's data has (stores, RAG, agent sessions,
the librarian, loads, LazyRAG); the stores scope every query by it.

docs/gateway.md has this table as prose; ``tests/unit/test_gateway_access.py`` keeps the
two in step.
"""
import logging
from dataclasses import dataclass

from trustgraph.schema import ROLES, Record, Role

from .caller import Caller
from .errors import GatewayError

log = logging.getLogger(__name__)

EVERYONE: frozenset[Role] = frozenset(ROLES)
MEMBERS: frozenset[Role] = frozenset({"admin", "user"})  # who may write their own data
ADMINS: frozenset[Role] = frozenset({"admin"})
NOBODY: frozenset[Role] = frozenset()  # the bus's own: never through the gateway


@dataclass(frozen=True)
class Permission:
    roles: frozenset[Role]
    llm: bool = False  # calls the LLM: refused once the key's tokens for the day are spent


ASK = Permission(EVERYONE, llm=True)
READ = Permission(EVERYONE)
WRITE = Permission(MEMBERS)
ADMIN = Permission(ADMINS)
INTERNAL = Permission(NOBODY)

# Service → its permission, or, for a service of several operations, operation → it.
TABLE: dict[str, Permission | dict[str, Permission]] = {
    "text-completion": ASK,
    "prompt": ASK,
    "graph-rag": ASK,
    "document-rag": ASK,
    "lazy-rag": ASK,
    "agent": ASK,  # its sessions are the user's; its tools are config (admin's)
    "lazy-rag-expand": READ,
    "lazy-rag-status": READ,
    "embeddings": READ,
    "triples": READ,
    "graph-embeddings": READ,
    "document-embeddings": READ,
    "lexical-search": READ,
    "subgraph": READ,
    "load-status": READ,
    "text-load": WRITE,
    "document-load": WRITE,
    "knowledge-load": WRITE,
    "reembed": WRITE,  # re-embeds the user's own collection with the configured model
    # knowledge cores, a page at a time (apis/cores.py): out as reading, in as writing
    **dict.fromkeys(("core-documents", "core-vectors", "core-triples"), {
        "count": READ, "export": READ, "import": WRITE}),
    "librarian": {
        "list-documents": READ, "list-collections": READ, "get-document-metadata": READ,
        "get-document-content": READ, "add-document": WRITE, "remove-document": WRITE,
        "add-processing": WRITE, "begin-upload": WRITE, "upload-part": WRITE,
        "complete-upload": WRITE,
    },
    "config": {  # prompts, tools (an MCP tool's URL), flows: everyone's answers run on them
        "get": WRITE, "list": WRITE, "getvalues": WRITE, "config": WRITE,
        "put": ADMIN, "delete": ADMIN,
    },
    "keys": {
        "add-user": ADMIN, "list-users": ADMIN, "create-key": ADMIN, "list-keys": ADMIN,
        "revoke-key": ADMIN, "verifiers": INTERNAL, "record-use": INTERNAL,
    },
}


def permission(service: str, operation: str | None = None) -> Permission:
    """What ``service`` (and ``operation``, for a service of several) needs; a service
    or operation not in the table needs what nobody has."""
    entry = TABLE.get(service, INTERNAL)
    if isinstance(entry, dict):
        return entry.get(operation or "", INTERNAL)
    return entry


def may(caller: Caller, service: str, operation: str | None = None) -> bool:
    """Whether ``caller``'s role may use ``service`` (``operation``) at all."""
    return caller.role in permission(service, operation).roles


def allowed(role: Role | None) -> dict[str, frozenset[str] | None]:
    """What ``role`` may use: service → the operations it may (None: the service has
    none, it may use all of it). For a client to offer only what will be allowed
    (the MCP server's tools, the workbench's views)."""
    result: dict[str, frozenset[str] | None] = {}
    for service, entry in TABLE.items():
        if isinstance(entry, dict):
            operations = frozenset(op for op, p in entry.items() if role in p.roles)
            if operations:
                result[service] = operations
        elif role in entry.roles:
            result[service] = None
    return result


def authorize(caller: Caller, service: str, record: Record) -> tuple[Record, Permission]:
    """``record`` as ``caller`` may send it to ``service``, and what the service
    needs; or the 403 saying why not. The role must be given the service (its
    operation) by the table, and the request acts for the caller's user (filled in
    when it names none)."""
    # Looked for in the fields first: a missing attribute costs pydantic a slow path.
    fields = type(record).model_fields
    operation = getattr(record, "operation") if "operation" in fields else None  # noqa: B009
    needs = permission(service, operation)
    if caller.role not in needs.roles:
        what = f"{service} {operation}" if operation else service
        raise forbidden(f"role {caller.role or 'none'!r} may not use {what}")
    if "user" not in fields:
        return record, needs
    named = getattr(record, "user") if "user" in record.model_fields_set else None  # noqa: B009
    user = acts_for(caller, named, service)
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
