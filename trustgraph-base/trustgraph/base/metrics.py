"""Prometheus metrics per processor: requests, errors, latency, time to first response."""
import time

from prometheus_client import Counter, Gauge, Histogram

_BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120)

REQUESTS = Counter("tg_requests_total", "Requests received", ["service"])
ERRORS = Counter("tg_request_errors_total", "Requests that ended in an error", ["service"])
LATENCY = Histogram("tg_request_seconds", "Time from request to final record",
                    ["service"], buckets=_BUCKETS)
FIRST_RESPONSE = Histogram("tg_first_response_seconds",
                           "Time from request to its first response record (TTFT)",
                           ["service"], buckets=_BUCKETS)

# A request accepted while every TG_CONCURRENCY slot is busy waits: how many wait
# now (the queue's depth) and for how long each waited.
WAITING = Gauge("tg_requests_waiting", "Requests waiting for a concurrency slot",
                ["service"])
SLOT_WAIT = Histogram("tg_slot_wait_seconds", "Time a request waited for a concurrency "
                      "slot (only requests that had to wait)", ["service"], buckets=_BUCKETS)


class RequestTimer:
    __slots__ = ("service", "started")

    def __init__(self, service: str) -> None:
        self.service = service
        self.started = time.perf_counter()
        REQUESTS.labels(service).inc()

    def responded(self) -> None:
        """The first response went out (called once)."""
        FIRST_RESPONSE.labels(self.service).observe(time.perf_counter() - self.started)

    def failed(self) -> None:
        ERRORS.labels(self.service).inc()

    def done(self) -> None:
        LATENCY.labels(self.service).observe(time.perf_counter() - self.started)
