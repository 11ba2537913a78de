"""What can go wrong at the gateway, as ``{type, message}`` plus an HTTP status.

``classify`` is the one place an exception becomes a gateway error; the websocket
and REST boundaries each format its result in one function of their own.
"""
import logging

from pydantic import ValidationError

from trustgraph.base import RequestTimeout, ServiceError

log = logging.getLogger(__name__)


# A service's error type as an HTTP status: the client's mistakes are 4xx, "not now"
# is 503, and any other failure of the service (the LLM refused, a store is down) 502.
SERVICE_STATUS = {
    "bad-request": 400, "too-many-texts": 400,
    "not-found": 404,
    "conflict": 409,
    "embedding-model-mismatch": 409,  # a knowledge core's vectors are of another model
    "too-large": 413,
    "no-service": 503, "overloaded": 503,
}


class GatewayError(Exception):
    def __init__(self, type: str, message: str, status: int = 400,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.status = status
        self.retry_after = retry_after  # seconds, for a Retry-After header

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


def bad_request(message: str) -> GatewayError:
    return GatewayError("bad-request", message, 400)


def too_large(what: str, size: int | None, limit: int, setting: str = "") -> GatewayError:
    """413, saying the limit (and what sets it): ``size`` None when not known."""
    how_big = f"{what} is {size} bytes," if size else f"{what} is"
    where = f" ({setting})" if setting else ""
    return GatewayError("too-large", f"{how_big} over the limit of {limit} bytes{where}",
                        413)


def service_status(error_type: str) -> int:
    """The HTTP status of a service's own error."""
    return SERVICE_STATUS.get(error_type, 502)


def validation_message(error: ValidationError, where: str = "request") -> str:
    """The first problem, naming its field, e.g. ``request.prompt: Field required``
    (``where=""`` for a body whose fields are top-level: ``query: Field required``)."""
    problem = error.errors()[0]
    parts = [str(part) for part in (where, *problem["loc"]) if part != ""]
    if len(parts) > 12:  # a value nested hundreds deep: its start and its end say enough
        parts = [*parts[:8], "…", *parts[-2:]]
    return f"{'.'.join(parts) or 'body'}: {problem['msg']}"


def classify(exception: BaseException) -> GatewayError:
    if isinstance(exception, GatewayError):
        return exception
    if isinstance(exception, RequestTimeout):
        return GatewayError("timeout", str(exception), 504)
    if isinstance(exception, ServiceError):
        return GatewayError(exception.error.type, exception.error.message,
                            service_status(exception.error.type))
    if isinstance(exception, ValidationError):
        return bad_request(validation_message(exception))
    log.warning("gateway failure: %s: %s", type(exception).__name__, exception,
                exc_info=exception)
    # The exception's own words (e.g. a bus timeout) help; a stack trace never leaves.
    detail = f"{type(exception).__name__}: {exception}"[:300]
    return GatewayError("gateway-error", f"the gateway could not serve this request: {detail}",
                        500)
