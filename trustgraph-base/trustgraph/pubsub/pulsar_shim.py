"""What the transport takes from pulsar-client beyond its public API, in one place,
and the pulsar-client versions it was checked against.

Three private calls sit on the hot path, each because the public ``pulsar.asyncio``
API costs a wake-up of the event loop per message (bus.py measures them):

* ``post``: a send that asks for no receipt (``pulsar.asyncio`` awaits every one);
* ``receive_into``: a receive whose callback may run on the caller's thread
  (``pulsar.asyncio`` settles every message through ``call_soon_threadsafe``);
* ``message``: the ``pulsar.Message`` for what that receive handed over.

Each reaches into attributes that pulsar-client may rename in any release, so this
module refuses to load under a version it was not checked against: a clear error at
start-up rather than an ``AttributeError`` on the first message. To allow a new
version, read these three functions against its source, run the integration tests,
and add it to ``CHECKED``.

Also here: the broker's size limit for one message, which the transport's users
(the gateway, stages, the librarian) size their records by.
"""
from collections.abc import Callable

import _pulsar
import pulsar
import pulsar.asyncio as pulsar_async

CHECKED = ("3.13.",)  # pulsar-client versions (prefixes) these calls were checked against

# pulsar-lite 0.2.0 refuses a message of 5,232,640 bytes or more, metadata included
# (Pulsar's default is 5 MiB); its chunking is broken, so nothing relies on it.
MESSAGE_LIMIT = 5_232_640
# The largest record one message carries: the rest is room for the message's
# properties and metadata.
MAX_RECORD_BYTES = 5 * 1024 * 1024 - 64 * 1024

Receipt = Callable[[pulsar.Result, object], None] | None
Settle = Callable[[pulsar.Result, object], None]


def check_version(version: str = pulsar.__version__) -> None:
    if not version.startswith(CHECKED):
        raise ImportError(
            f"pulsar-client {version} is not a version trustgraph's transport was checked "
            f"against ({', '.join(v + 'x' for v in CHECKED)}): it calls three private "
            f"pulsar-client functions (trustgraph/pubsub/pulsar_shim.py) that may have "
            f"changed. Install a checked version (pip install 'pulsar-client~=3.13.0'), "
            f"or check those calls against {version} and add it to CHECKED.")


check_version()


def post(producer: pulsar_async.Producer, data: bytes, properties: dict[str, str],
         receipt: Receipt) -> None:
    """Send without awaiting: ``receipt(result, message_id)`` is called on the
    client's thread when the broker confirms, or nothing when it is None."""
    builder = _pulsar.MessageBuilder()
    builder.content(data)
    for key, value in properties.items():
        builder.property(key, value)
    producer._producer.send_async(builder.build(), receipt)


def receive_into(consumer: pulsar_async.Consumer, settle: Settle) -> None:
    """Ask for the next message: ``settle(result, received)`` runs at once on this
    thread when one is already queued, else later on the client's thread."""
    consumer._consumer.receive_async(settle)


def message(received: object, consumer: pulsar_async.Consumer) -> pulsar.Message:
    """The ``pulsar.Message`` for what ``receive_into`` handed to ``settle``."""
    wrapped = pulsar.Message()
    wrapped._message, wrapped._schema = received, consumer._schema
    return wrapped
