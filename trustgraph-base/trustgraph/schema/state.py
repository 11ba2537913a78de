"""What a processor says about itself, every ``TG_STATE_PERIOD`` seconds, on
``STATE_TOPIC`` (non-persistent: a record nobody hears is dropped; only the latest
matters). The gateway keeps the latest of each instance and serves them as
``GET /api/v1/status`` (docs/observability.md); a processor not heard from for
``MISSED`` periods is down.

A processor stopping says so (``up`` false) as its last record; one killed just
falls silent.
"""
from .record import Record

# Periods without a record after which a processor is taken as down.
MISSED = 3


class LastError(Record):
    """The last warning or error its process logged."""

    time: float  # Unix seconds
    message: str


class StoreCheck(Record):
    """A store owner's own check of its store: a read, and a write it takes back."""

    store: str  # "triples", "vectors", "library", ...
    readable: bool
    writable: bool
    message: str = ""  # what failed, if anything
    time: float = 0.0  # when it was checked (Unix seconds)


class ProcessorState(Record):
    processor: str  # the spec's name (as a blueprint names it)
    instance: str  # unique per process start: <processor>-<8 hex>
    process: str = ""  # tg-start's name for the process (group, replica: "extract.1")
    pid: int = 0
    host: str = ""
    up: bool = True  # false: its last record, sent as it stops
    started: float = 0.0  # Unix seconds
    period: float = 0.0  # seconds until its next record
    flows: list[str] = []  # the flows it serves now
    services: list[str] = []  # its services and stages
    in_flight: int = 0  # requests and pipeline records in hand
    waiting: int = 0  # requests among them waiting for a TG_CONCURRENCY slot
    last_error: LastError | None = None
    stores: list[StoreCheck] = []
