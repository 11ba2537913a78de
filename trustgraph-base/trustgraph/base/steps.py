"""How a service runs the calls it makes to other services.

Every call is a named step, so a failure reaches the user as the calling service's
own error (``graph-rag-error``, ``agent-error``, ...) saying which step failed and
what the service behind it said. Calls made at once run in one task group: the
first failure cancels the others (and so their requests) and is raised as itself.
"""
import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

from .rpc import RequestTimeout, ServiceError
from .service import HandledError

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


@contextmanager
def step(error_type: str, what: str) -> Iterator[None]:
    """Turn a failed call inside the block into ``HandledError(error_type, ...)``."""
    try:
        yield
    except ServiceError as failure:
        raise HandledError(error_type, f"{what} failed: {failure.error.type}: "
                                       f"{failure.error.message}") from None
    except RequestTimeout as failure:
        raise HandledError(error_type, f"{what} failed: {failure}") from None


@overload
async def concurrently(first: Coroutine[Any, Any, A], second: Coroutine[Any, Any, B], /
                       ) -> tuple[A, B]: ...
@overload
async def concurrently(*calls: Coroutine[Any, Any, T]) -> tuple[T, ...]: ...
async def concurrently(*calls: Coroutine[Any, Any, Any]) -> tuple[Any, ...]:
    """The results of ``calls`` run at once, in order; the first failure is raised
    (not wrapped in an ExceptionGroup) after the other calls are cancelled."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return tuple(task.result() for task in tasks)
