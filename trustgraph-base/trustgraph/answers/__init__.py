"""An answer stream read once, as events, for every API to render: ``Reader`` turns
a service's response records into ``Opened``, ``Progress``, ``Text``, ``Step``,
``Sources``, ``Done`` or ``Failed`` events, by what its response model declares.

Shared by the gateway's APIs and the client library; it imports only the records
(``trustgraph.schema``), never the processors' runtime or the Pulsar transport."""
from .events import Done, Event, Failed, Opened, Progress, Source, Sources, Step, Text
from .reader import Reader

__all__ = ["Done", "Event", "Failed", "Opened", "Progress", "Reader", "Source", "Sources",
           "Step", "Text"]
