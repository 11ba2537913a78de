"""The gateway's core: the table-driven websocket and REST dispatch (one row per
service, one generic requestor), its errors, framing, auth and metrics, and what an
API module is given (``Core``). It imports no processor package and no API module."""
from .access import acts_for, allowed, may, permission
from .api import Core, Handler, Route
from .caller import ITSELF, Caller
from .dispatch import Dispatcher, Frame, new_request_id, raise_error
from .errors import GatewayError, bad_request, validation_message
from .flows import FLOW_HEADER, named_flow
from .metrics import REQUESTS
from .openapi import REF, Document, Refs, SchemaMode
from .responses import NDJSON, StreamFormat, failed, json_body, streamed
from .services import SERVICES, ServiceRow
from .settings import CoreSettings

__all__ = ["FLOW_HEADER", "ITSELF", "Caller", "Core", "CoreSettings", "Dispatcher",
           "Document", "Frame", "GatewayError", "Handler", "NDJSON", "REF", "REQUESTS",
           "Refs", "Route", "SERVICES", "SchemaMode", "ServiceRow", "StreamFormat",
           "acts_for", "allowed", "bad_request", "failed", "json_body", "may", "named_flow",
           "new_request_id", "permission", "raise_error", "streamed", "validation_message"]
