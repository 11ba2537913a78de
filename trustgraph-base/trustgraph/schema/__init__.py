from .record import Error, Record, Response, decode, encode
from .text_completion import TextCompletionRequest, TextCompletionResponse
from .topics import CANCEL_TOPIC, flow_topic, request_topic, response_topic

__all__ = [
    "CANCEL_TOPIC", "Error", "Record", "Response", "TextCompletionRequest",
    "TextCompletionResponse", "decode", "encode", "flow_topic", "request_topic",
    "response_topic",
]
from .cancel import Cancel  # noqa: E402

__all__ += ["Cancel"]
