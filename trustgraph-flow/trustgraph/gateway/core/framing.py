"""Response frames on the hot path.

A bus record's JSON is already its wire form (snake_case, unset optionals left
out), so the gateway splices those bytes into the envelope without decoding them.
Only when a client has fallen behind, and several records wait at once, are the
waiting deltas decoded and merged into one frame (``coalesce``).
"""
import json
import math
from collections.abc import Callable, Hashable

Frame = tuple[bytes, bool]  # (record JSON, is the final record)
RunKey = Callable[[dict], Hashable | None]  # which neighbours a delta may merge with

TOKEN_FIELDS = ("in_token", "out_token")
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


def same_keys(record: dict) -> Hashable:
    return frozenset(record)


def coalesce(batch: list[Frame], delta_field: str | None,
             run_key: RunKey = same_keys) -> list[Frame]:
    """Merge runs of consecutive non-final records with the same ``run_key`` (by
    default: the same keys) into one record: ``delta_field`` concatenated, token
    counts summed, other fields from the last. Final records, and records whose run
    key is None, are never merged. A batch of one, or a service without a delta
    field, comes back untouched."""
    if len(batch) < 2 or delta_field is None:
        return batch
    merged: list[Frame] = []
    run: list[tuple[bytes, dict]] = []
    run_of: Hashable | None = None  # the run key of the records in ``run``
    for data, final in batch:
        record = None if final else _mergeable(data, delta_field)
        key = None if record is None else run_key(record)
        if run and key != run_of:
            merged.append(_merge(run, delta_field))
            run = []
        if key is None or record is None:
            merged.append((data, final))
        else:
            run.append((data, record))
            run_of = key
    if run:
        merged.append(_merge(run, delta_field))
    return merged


def _mergeable(data: bytes, delta_field: str) -> dict | None:
    record = json.loads(data)
    if isinstance(record, dict) and isinstance(record.get(delta_field), str):
        return record
    return None


def _merge(run: list[tuple[bytes, dict]], delta_field: str) -> Frame:
    if len(run) == 1:
        return run[0][0], False  # nothing to merge: keep the original bytes
    records = [record for _, record in run]
    merged = dict(records[-1])
    merged[delta_field] = "".join(record[delta_field] for record in records)
    for field in TOKEN_FIELDS:
        if field in merged:
            merged[field] = sum(record[field] or 0 for record in records)
    return json.dumps(merged, ensure_ascii=False, separators=(",", ":")).encode(), False
