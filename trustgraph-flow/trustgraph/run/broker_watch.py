"""Restarts the embedded broker when it holds on to the consumers of a dead process.

pulsar-lite 0.2.0 sometimes keeps the consumers of a connection that ended abruptly
(a SIGKILLed processor whose socket was reset while the broker was writing to it):
they stay registered, holding their unacknowledged records, and the processor's
restarted successor is refused ("Consumer N already exists") for as long as the
broker runs, so that stage of the pipeline stops for good. A broker restart drops
them and redelivers every unacknowledged record (cursors are on disk), and every
client reconnects by itself. So when the broker logs that refusal, ``WedgeWatch``
has it restarted. Killing several busy processes can wedge several subscriptions a
few seconds apart, so a second restart is allowed soon after the first; but each
restart that follows the one before within ``max_interval`` doubles the wait before
the next, so a refusal with another cause (two replicas given the same TG_REPLICA)
cannot turn into a tight restart loop.
"""
import asyncio
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

WEDGED = re.compile(rb"Consumer \d+ already exists")


class WedgeWatch:
    def __init__(self, log_path: Path, restart: Callable[[], None], poll: float = 0.5,
                 first_interval: float = 5.0, max_interval: float = 300.0) -> None:
        self._path = log_path
        self._restart = restart
        self._poll = poll
        self._first, self._max = first_interval, max_interval
        self._interval = first_interval  # the least time between two restarts, now
        self._offset = self._size()  # what the log said before now is not news
        self._last: float | None = None  # when it last restarted the broker

    def _size(self) -> int:
        try:
            return self._path.stat().st_size
        except FileNotFoundError:
            return 0

    def _news(self) -> bytes:
        """What the log gained since the last look (from the start if it was cut)."""
        size = self._size()
        if size < self._offset:
            self._offset = 0
        if size == self._offset:
            return b""
        with open(self._path, "rb") as file:
            file.seek(self._offset)
            news = file.read(size - self._offset)
        self._offset = size
        return news

    def check(self) -> bool:
        """One look at the log; whether a restart was asked for."""
        if not WEDGED.search(self._news()):
            return False
        now = time.monotonic()
        if self._last is not None:
            since = now - self._last
            if since < self._interval:
                return False  # the clients' own retries will log it again
            self._interval = (min(self._interval * 2, self._max) if since < self._max
                              else self._first)
        self._last = now
        log.warning("the broker refuses a consumer because a dead process's consumer is "
                    "still registered (a pulsar-lite fault after a process is killed); "
                    "restarting the broker to release it")
        self._restart()
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._poll)
            self.check()
