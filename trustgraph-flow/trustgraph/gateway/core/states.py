"""What the processors said about themselves (``schema/state.py``): the latest state
record of each instance, heard on the state topic, and the gateway's own.

A processor is up while its records keep coming (within ``MISSED`` of its periods);
one that said it stopped, or fell silent, is down, and is listed so for
``FORGET_AFTER`` seconds (a restarted process is a new instance). The gateway sends
its own record too and hears it back: that round trip is the broker's check.
"""
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from trustgraph.base.state import StatePublisher
from trustgraph.pubsub import Bus, Message
from trustgraph.schema.state import MISSED, ProcessorState
from trustgraph.schema.topics import STATE_TOPIC

FORGET_AFTER = 600.0  # seconds a down instance stays listed


@dataclass
class Heard:
    state: ProcessorState
    at: float  # monotonic seconds

    def age(self, now: float) -> float:
        return now - self.at

    def up(self, now: float) -> bool:
        return self.state.up and self.age(now) <= MISSED * max(self.state.period, 0.1)


class ProcessorStates:
    def __init__(self, bus: Bus, owner: str, period: float,
                 own: Callable[[], ProcessorState]) -> None:
        self._bus = bus
        self.owner = owner  # this gateway's instance, and its subscription's name
        self._heard: dict[str, Heard] = {}
        self.publisher = StatePublisher(bus, own, period)

    async def start(self) -> None:
        """Listen (a subscription of its own: every gateway hears every record)."""
        await self._bus.consume(STATE_TOPIC, f"{self.owner}-state", self._on_state,
                                name="states")

    async def _on_state(self, message: Message) -> None:
        try:
            state = ProcessorState.model_validate_json(message.data())
        except ValidationError:
            return  # not a state record: nothing to keep
        self._heard[state.instance] = Heard(state, time.monotonic())

    def heard(self) -> list[tuple[ProcessorState, bool, float]]:
        """Each instance's latest record, whether it is up, and its age in seconds;
        instances down for ``FORGET_AFTER`` are forgotten."""
        now = time.monotonic()
        self._heard = {instance: heard for instance, heard in self._heard.items()
                       if heard.age(now) < FORGET_AFTER}
        return [(heard.state, heard.up(now), round(heard.age(now), 3))
                for heard in sorted(self._heard.values(),
                                    key=lambda h: (h.state.processor, h.state.process,
                                                   h.state.started))]

    def broker_up(self) -> bool:
        """Whether this gateway's own last record came back through the broker in time."""
        heard = self._heard.get(self.owner)
        return heard is not None and heard.up(time.monotonic())
