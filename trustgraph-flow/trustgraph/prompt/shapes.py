"""Pieces of the JSON Schemas the shipped templates declare."""
from typing import Any


def text(max_length: int) -> dict[str, Any]:
    """A string of text: not empty, and bounded, so that a model held to the schema
    ends it (a small model would otherwise run on to max_tokens)."""
    return {"type": "string", "minLength": 1, "maxLength": max_length}
