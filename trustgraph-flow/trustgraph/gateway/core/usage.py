"""LLM tokens counted where every answer passes (``Dispatcher.frames``): per flow,
user, key and model, in and out, and what they cost at the prices config type
``token-cost`` holds (TrustGraph's layout: per model, ``input_price`` and
``output_price`` in dollars per token).

Two destinations: the Prometheus counters below (per flow, user and model), at
once; and, kept durably, the day's rows (per key too) handed to the ``KeyRing``'s
next report (``drain``) for the keys service to add up (``GET /api/v1/usage``).

Labels stay bounded: a new (flow, user, model) set beyond ``max_series`` is counted
as user ``other``; flows and models are few (config names them).
"""
import json
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter

from trustgraph.base import ConfigClient, ConfigWatcher
from trustgraph.pubsub import Bus
from trustgraph.schema import Usage
from trustgraph.schema.keys import UsageRow, utc_day

from .caller import Caller

log = logging.getLogger(__name__)

TOKEN_COST_TYPE = "token-cost"  # config type: model → {"input_price", "output_price"}
# Where TrustGraph 2.11.1's tg-set-token-costs writes them (its tg-show-token-costs
# reads token-cost): read too, token-cost's item winning for a model in both.
TRUSTGRAPH_SET_TYPE = "token-costs"
OTHER = "other"
MAX_SERIES = 1000  # label sets of tg_llm_tokens_total before new ones are "other"

# No key, not even its id: /metrics may be read by more people than keys (a test holds
# it); per key, the tokens are in the daily usage, for admins.
TOKENS = Counter("tg_llm_tokens_total", "LLM tokens of the answers, by flow, user and "
                 "model", ["flow", "user", "model", "direction"])
COST = Counter("tg_llm_cost_dollars_total", "What the LLM tokens cost at token-cost's "
               "prices (models without a price count nothing)", ["flow", "user", "model"])
Prices = Mapping[str, tuple[float, float]]  # model → ($ per input token, per output)


class UsageLedger:
    def __init__(self, max_series: int) -> None:
        self.max_series = max_series
        self.prices: Prices = {}
        self._series: set[tuple[str, str, str]] = set()
        self._rows: dict[tuple[str, str, str, str, str], UsageRow] = {}
        self._watcher: ConfigWatcher | None = None

    def count(self, caller: Caller, flow: str, usage: Usage) -> None:
        """One answer's tokens (nothing when it reported none)."""
        tokens_in, tokens_out = usage.in_token or 0, usage.out_token or 0
        if not tokens_in and not tokens_out:
            return
        model, key = usage.model or "", caller.key_id or ""
        user = self._user_label(flow, caller.user, model)
        if tokens_in:
            TOKENS.labels(flow, user, model, "in").inc(tokens_in)
        if tokens_out:
            TOKENS.labels(flow, user, model, "out").inc(tokens_out)
        price_in, price_out = self.prices.get(model, (0.0, 0.0))
        if price_in or price_out:
            COST.labels(flow, user, model).inc(tokens_in * price_in + tokens_out * price_out)
        day = utc_day()
        # Made only when the day's row is new: a pydantic row built (and validated)
        # on every answer only to be dropped by setdefault was most of this call.
        row = self._rows.get(series := (day, caller.user, flow, model, key))
        if row is None:
            row = self._rows[series] = UsageRow(day=day, user=caller.user, flow=flow,
                                                model=model, key=key)
        row.in_tokens += tokens_in
        row.out_tokens += tokens_out
        row.requests += 1

    def _user_label(self, flow: str, user: str, model: str) -> str:
        series = (flow, user, model)
        if series in self._series or len(self._series) < self.max_series:
            self._series.add(series)
            return user
        return OTHER

    def drain(self) -> list[UsageRow]:
        """The rows counted since the last drain (to report), forgotten here."""
        rows, self._rows = list(self._rows.values()), {}
        return rows

    def give_back(self, rows: list[UsageRow]) -> None:
        """Rows a report could not deliver: counted again with the next."""
        for row in rows:
            kept = self._rows.setdefault((row.day, row.user, row.flow, row.model, row.key),
                                         row.model_copy(update={"in_tokens": 0,
                                                                "out_tokens": 0,
                                                                "requests": 0}))
            kept.in_tokens += row.in_tokens
            kept.out_tokens += row.out_tokens
            kept.requests += row.requests

    def priced(self, items: Mapping[str, Any]) -> None:
        """Config's ``token-cost`` items, as prices (an item that is not one is logged
        and left out)."""
        prices = {}
        for model, item in items.items():
            try:
                value = json.loads(item) if isinstance(item, str) else item
                prices[model] = (float(value["input_price"]), float(value["output_price"]))
            except (KeyError, TypeError, ValueError):
                log.warning("config item %s/%s is not a token cost: not priced",
                            TOKEN_COST_TYPE, model)
        self.prices = prices

    async def follow_prices(self, bus: Bus, owner: str, wait: float) -> None:
        """Keep ``prices`` as config says, from now on."""
        client = await ConfigClient.connect(bus, f"{owner}-costs")
        self._watcher = ConfigWatcher(bus, client, [TRUSTGRAPH_SET_TYPE, TOKEN_COST_TYPE],
                                      self._changed,
                                      subscription=f"{owner}-costs")
        await self._watcher.start(wait)

    def close(self) -> None:
        """Let go of the watcher (it holds this object: a cycle)."""
        self._watcher = None

    async def _changed(self, config: dict[str, dict[str, Any]], version: int) -> None:
        self.priced({**config.get(TRUSTGRAPH_SET_TYPE, {}), **config.get(TOKEN_COST_TYPE, {})})
