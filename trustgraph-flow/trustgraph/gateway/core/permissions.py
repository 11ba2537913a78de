"""What a service, or one operation of it, needs of its caller: the roles that may
use it, and whether it calls the LLM. Each service's row (services.py) carries its
own; ``access.authorize`` applies them.

Roles: ``admin`` may do everything, for any user; ``user`` reads and writes its own
data and reads the shared configuration (prompts, tools); ``reader`` asks and
searches its own data."""
from dataclasses import dataclass

from trustgraph.schema import ROLES, Role

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
