"""The Python client library for a TrustGraph gateway.

``AsyncTrustGraph`` is the client; ``TrustGraph`` is the same client for blocking
code. Both speak the gateway's websocket protocol (one socket, many concurrent
requests, streaming answers, cancel on early exit) and, for the answer-stream API,
its REST endpoint. Errors are ``TrustGraphError``.
"""
from .agent import (
                    AgentAction,
                    AgentAnswer,
                    AgentEvent,
                    AgentFinal,
                    AgentObservation,
                    AgentResult,
                    AgentStream,
                    AgentThought,
)
from .async_client import DEFAULT_URL, AsyncTrustGraph
from .errors import TrustGraphError
from .lazy_rag import LazyAnswer, LazyResult
from .rag import Answer, Chunk, Final, Metadata, RagEvent, RagStream, Result
from .streams import Completion, TextStream, Usage
from .sync_client import SyncStream, TrustGraph

__all__ = ["DEFAULT_URL", "AgentAction", "AgentAnswer", "AgentEvent", "AgentFinal",
           "AgentObservation", "AgentResult", "AgentStream", "AgentThought", "Answer",
           "AsyncTrustGraph", "Chunk", "Completion", "Final", "LazyAnswer", "LazyResult",
           "Metadata", "RagEvent", "RagStream", "Result", "SyncStream", "TextStream", "TrustGraph",
           "TrustGraphError", "Usage"]
