"""What the transport takes from pulsar-client beyond its public API, in one place,
and the pulsar-client versions it was checked against.

The public ``pulsar.asyncio`` API costs a wake-up of the event loop per message
(bus.py measures them), so the transport's hot path uses the C extension's own calls,
which this module resolves once, when a producer or a receive loop is made, so that
no Python frame of its own runs per message:

* ``sender``: a producer's send that asks for no receipt (``pulsar.asyncio`` awaits
  every one), given a message built with ``MessageBuilder``;
* ``flusher``: a producer's flush without awaiting it, for the producers that batch
  what one turn of the event loop posts (``Bus.producer(..., batched=True)``);
* ``receiver``: a consumer's receive whose callback may run on the caller's thread
  (``pulsar.asyncio`` settles every message through ``call_soon_threadsafe``);
* ``Message``: what that receive hands over, used as it is (``data()``,
  ``properties()``, ``message_id()``, ``redelivery_count()``; the consumer's
  ``acknowledge`` and ``negative_acknowledge`` take it), rather than wrapped per
  message in a ``pulsar.Message`` whose methods only forward to it.

Each reaches into names that pulsar-client may change in any release, so this
module refuses to load under a version it was not checked against: a clear error at
start-up rather than an ``AttributeError`` on the first message. To allow a new
version, read these against its source, run the integration tests, and add it to
``CHECKED``.

Also here: the broker's size limit for one message, which the transport's users
(the gateway, stages, the librarian) size their records by.
"""
from collections.abc import Callable
from typing import TypeAlias

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
            f"against ({', '.join(v + 'x' for v in CHECKED)}): it uses private "
            f"pulsar-client calls (trustgraph/pubsub/pulsar_shim.py) that may have "
            f"changed. Install a checked version (pip install 'pulsar-client~=3.13.0'), "
            f"or check those calls against {version} and add it to CHECKED.")


check_version()


# The message the C extension builds and receives (``_pulsar``: private to pulsar-client).
Message: TypeAlias = _pulsar.Message
MessageBuilder: TypeAlias = _pulsar.MessageBuilder
Send = Callable[[Message, Receipt], None]
Flush = Callable[[Callable[[pulsar.Result], None]], None]
Receive = Callable[[Settle], None]


def sender(producer: pulsar_async.Producer) -> Send:
    """``producer``'s send without awaiting: ``send(message, receipt)`` calls
    ``receipt(result, message_id)`` on the client's thread when the broker confirms,
    or nothing when it is None."""
    return producer._producer.send_async


def flusher(producer: pulsar_async.Producer) -> Flush:
    """``producer``'s flush without awaiting: ``flush(done)`` sends the batch being
    filled now, and calls ``done(result)`` on the client's thread once it is sent."""
    return producer._producer.flush_async


def receiver(consumer: pulsar_async.Consumer) -> Receive:
    """``consumer``'s receive: ``receive(settle)`` asks for the next message, and
    ``settle(result, message)`` runs at once on this thread when one is already
    queued, else later on the client's thread."""
    return consumer._consumer.receive_async
