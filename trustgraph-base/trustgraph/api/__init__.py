"""The Python client library for a TrustGraph gateway.

``AsyncTrustGraph`` is the client; ``TrustGraph`` is the same client for blocking
code. Both speak the gateway's websocket protocol: one socket, many concurrent
requests, streaming answers, cancel on early exit. Errors are ``TrustGraphError``.
"""
from .async_client import DEFAULT_URL, AsyncTrustGraph
from .errors import TrustGraphError
from .streams import Completion, TextStream, Usage
from .sync_client import SyncStream, TrustGraph

__all__ = ["DEFAULT_URL", "AsyncTrustGraph", "Completion", "SyncStream", "TextStream",
           "TrustGraph", "TrustGraphError", "Usage"]
