"""``Topic``: everything that arrives on a stage topic of a flow, acknowledged, to
look at and wait on."""
import asyncio
import uuid

from tests.support.waiting import signalled
from trustgraph.schema import decode, flow_topic


class Topic:
    """Everything that arrives on a stage topic of a flow, acknowledged (a new
    subscription also sees what was sent there before it)."""

    def __init__(self, record):
        self.record = record
        self.seen = []
        self.arrived = asyncio.Event()

    @classmethod
    async def watch(cls, bus, stage, flow, record):
        topic = cls(record)
        consumer = await bus.subscribe(flow_topic(stage, flow), f"test-{uuid.uuid4().hex[:6]}")

        async def handle(message):
            topic.seen.append(decode(record, message.data()))
            topic.arrived.set()
            await consumer.acknowledge(message)

        bus.receive(consumer, handle)
        return topic

    async def wait(self, count, timeout=10.0):
        """``seen`` once it holds ``count`` records or more."""
        await signalled(self.arrived, lambda: len(self.seen) >= count,
                        f"{count} {self.record.__name__} records", timeout=timeout)
        return self.seen
