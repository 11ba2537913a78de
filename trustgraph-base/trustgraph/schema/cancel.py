from .record import Record


class Cancel(Record):
    """Broadcast to every processor: stop the work for request ``id``."""

    id: str
