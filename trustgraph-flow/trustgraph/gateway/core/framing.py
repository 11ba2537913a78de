"""Response frames on the hot path.

A bus record's JSON is already its wire form (snake_case, unset optionals left
out), so the gateway splices those bytes into the envelope without decoding them.
Only when a client has fallen behind, and several records wait at once, are the
waiting deltas decoded and merged into one frame (``trustgraph.base.coalesce``, by
the rules each response model declares).
"""
import json
import math

Frame = tuple[bytes, bool]  # (record JSON, is the final record)

_MORE = b',"complete":false}'
_END = b',"complete":true}'


class Envelope:
    """The websocket frames of one request: ``{"id", "response"|"error", "complete"}``."""

    __slots__ = ("_id",)

    def __init__(self, client_id: object) -> None:
        self._id = b'{"id":' + json.dumps(echoable(client_id)).encode()  # once per request

    def response(self, record: bytes, final: bool) -> bytes:
        return b"".join((self._id, b',"response":', record, _END if final else _MORE))

    def error(self, error: dict[str, str]) -> bytes:
        return b"".join((self._id, b',"error":', json.dumps(error).encode(), _END))


def echoable(client_id: object) -> str | int | float | None:
    """The id to echo: only a string or a finite number; anything else (an object,
    a list nested a thousand deep, a bool, NaN) is answered with ``null``, so
    writing the answer can neither recurse nor produce invalid JSON."""
    if isinstance(client_id, str):
        return client_id
    if isinstance(client_id, int) and not isinstance(client_id, bool):
        return client_id
    if isinstance(client_id, float) and math.isfinite(client_id):
        return client_id
    return None
