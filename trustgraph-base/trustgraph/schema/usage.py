"""Tokens used by a request. Counts on the wire are deltas (PROTOCOL §4), so whoever
reports a total sums them: this is the one place that does."""
from dataclasses import dataclass
from typing import Any


@dataclass
class Usage:
    in_token: int | None = None  # None until something reports a count
    out_token: int | None = None
    model: str | None = None

    @classmethod
    def of(cls, item: Any) -> "Usage":
        """The token fields of a record, a result or a wire dict (missing: None)."""
        get = item.get if isinstance(item, dict) else lambda name: getattr(item, name, None)
        return cls(get("in_token"), get("out_token"), get("model"))

    def add(self, more: "Usage") -> "Usage":
        """Add another report in place (its missing counts add nothing); the latest
        model named wins. Returns self."""
        if more.in_token is not None:
            self.in_token = (self.in_token or 0) + more.in_token
        if more.out_token is not None:
            self.out_token = (self.out_token or 0) + more.out_token
        if more.model:
            self.model = more.model
        return self
