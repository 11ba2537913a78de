"""The services the gateway exposes: one row each. Adding a service is one row."""
from dataclasses import dataclass

from trustgraph.schema import (CONFIG_FLOW, ConfigRequest, ConfigResponse, PromptRequest,
                               PromptResponse, Record, Response, TextCompletionRequest,
                               TextCompletionResponse)


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    response_model: type[Response]
    delta_field: str | None        # the text field that streaming records carry as deltas;
                                   # None: the service does not stream, nothing is merged
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names

    def bus_flow(self, flow: str) -> str:
        """The flow the request goes to on the bus."""
        return self.global_flow or flow


SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse, "response"),
    ServiceRow("prompt", PromptRequest, PromptResponse, "text"),
    ServiceRow("config", ConfigRequest, ConfigResponse, None, global_flow=CONFIG_FLOW),
)}
