"""Per-key limits: requests in flight, requests per minute, and LLM tokens per day
(UTC). A request over one is refused before it reaches the bus: 429 ``rate-limited``
with ``Retry-After``. Counted in this process, in memory, by the caller's ``key_id``
(an API key's id, or a JWT's user); a caller without one (the gateway's token, an
open gateway) has no limits.

The tokens a key used today start from what the keys service last reported (every
gateway's reports added up, ``KeyRing``), plus what this gateway counted since; what
it counted is handed to the ``KeyRing`` to report (``uses``), with when each key was
last used. Two gateways serving one key may each let a request start before it
learns the other's count: the budget holds to within what one report period
(``KeyRing``'s) lets through.
"""
import math
import time
from dataclasses import dataclass, fields

from trustgraph.schema.keys import KeyLimits, KeyUse, utc_day

from .errors import GatewayError


@dataclass(frozen=True)
class Limits:
    concurrent: int | None = None  # None: no limit
    per_minute: int | None = None
    tokens_per_day: int | None = None

    @classmethod
    def of(cls, limits: KeyLimits, defaults: "Limits") -> "Limits":
        """A key's limits, each it leaves unset the gateway's default."""
        return cls(**{f.name: getattr(limits, f.name) or getattr(defaults, f.name)
                      for f in fields(cls)})


class Meter:
    """One key's counters."""

    __slots__ = ("in_flight", "allowance", "refilled", "day", "reported", "counted",
                 "last_used")

    def __init__(self) -> None:
        self.in_flight = 0
        self.allowance: float | None = None  # requests it may start now; None: all
        self.refilled = time.monotonic()
        self.day = _today()
        self.reported = 0  # tokens used today, as the keys service last said
        self.counted = 0  # tokens this gateway counted since, not yet reported
        self.last_used: float | None = None  # not yet reported

    def tokens_today(self) -> int:
        today = _today()
        if today != self.day:
            self.day, self.reported, self.counted = today, 0, 0
        return self.reported + self.counted


class Limiter:
    def __init__(self) -> None:
        self._meters: dict[str, Meter] = {}

    def admit(self, key_id: str | None, limits: Limits, llm: bool) -> Meter | None:
        """Count a request starting for ``key_id``, or refuse it (429): the checks
        first, so a refused request uses none of the allowance. ``release`` the
        meter returned when the request ends."""
        if key_id is None:
            return None
        meter = self._meters.get(key_id)
        if meter is None:
            meter = self._meters[key_id] = Meter()
        if limits.concurrent is not None and meter.in_flight >= limits.concurrent:
            raise rate_limited(f"this key has {meter.in_flight} requests in flight, its "
                               f"limit", 1)
        if limits.per_minute is not None:
            now = time.monotonic()
            full = float(limits.per_minute)
            meter.allowance = full if meter.allowance is None else min(
                full, meter.allowance + (now - meter.refilled) * full / 60)
            meter.refilled = now
            if meter.allowance < 1:
                wait = (1 - meter.allowance) * 60 / limits.per_minute
                raise rate_limited(f"this key may start {limits.per_minute} requests a "
                                   f"minute", wait)
        if llm and limits.tokens_per_day is not None \
                and meter.tokens_today() >= limits.tokens_per_day:
            raise rate_limited(f"this key has used its {limits.tokens_per_day} LLM tokens "
                               f"for today (UTC)", _until_midnight())
        if meter.allowance is not None and limits.per_minute is not None:
            meter.allowance -= 1
        meter.in_flight += 1
        meter.last_used = time.time()
        return meter

    @staticmethod
    def release(meter: Meter | None, tokens: int) -> None:
        if meter is None:
            return
        meter.in_flight -= 1
        if tokens:
            meter.tokens_today()  # a new day starts from nothing
            meter.counted += tokens

    def reported(self, key_id: str, day: str, tokens: int) -> None:
        """What the keys service says ``key_id`` used on ``day`` (every gateway's)."""
        meter = self._meters.get(key_id)
        if meter is None:
            meter = self._meters[key_id] = Meter()
        if day == meter.day:
            meter.reported = tokens

    def uses(self, key_ids: set[str] | dict) -> list[KeyUse]:
        """What to report for the keys among ``key_ids``: each used since the last
        report, with its tokens (now counted as reported)."""
        uses = []
        for key_id, meter in self._meters.items():
            if meter.last_used is None or key_id not in key_ids:
                continue
            meter.tokens_today()
            uses.append(KeyUse(id=key_id, last_used=meter.last_used, day=meter.day,
                               tokens=meter.counted))
            meter.reported += meter.counted
            meter.counted, meter.last_used = 0, None
        return uses


def rate_limited(why: str, retry_after: float) -> GatewayError:
    seconds = max(1, math.ceil(retry_after))
    return GatewayError("rate-limited", f"{why}; retry after {seconds} s", 429,
                        retry_after=seconds)


def _until_midnight() -> float:
    return 86400 - time.time() % 86400


_day: tuple[float, str] = (0.0, "")  # (when the day named ends, its name)


def _today() -> str:
    """``utc_day()``, worked out again only when a day ends: asked twice a request."""
    global _day
    now = time.time()
    if now >= _day[0]:
        _day = (now - now % 86400 + 86400, utc_day())
    return _day[1]
