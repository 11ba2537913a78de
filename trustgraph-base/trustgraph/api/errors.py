"""The one exception the client library raises, and the one place a wire error
becomes it."""
from typing import Any


class TrustGraphError(Exception):
    """A failure reported by the gateway, by a service, or met on the way to them.

    ``type`` is machine-readable: a service's own (``llm-error``, ``graph-rag-error``),
    a gateway's (``bad-request``, ``timeout``, ``auth``), or the client's
    (``connection``, ``overflow``). ``message`` is for people.
    """

    def __init__(self, type: str, message: str) -> None:
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


def error_from(value: Any) -> TrustGraphError:
    """A wire ``error`` (``{"type", "message"}``, or a bare string) as an exception."""
    if isinstance(value, dict):
        return TrustGraphError(str(value.get("type") or "error"),
                               str(value.get("message") or "no message given"))
    return TrustGraphError("error", str(value))
