"""The services the gateway exposes: one row each. Adding a service is one row."""
from dataclasses import dataclass

from trustgraph.schema import Record, Response, TextCompletionRequest, TextCompletionResponse


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    response_model: type[Response]
    delta_field: str               # the text field that streaming records carry as deltas


SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse, "response"),
)}
