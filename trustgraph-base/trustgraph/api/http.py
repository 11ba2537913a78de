"""The client's REST transport, for the gateway's HTTP-only APIs (the answer-stream
API ``/api/v1/query``, knowledge cores): a JSON request answered by one JSON body or
by NDJSON lines, and a file downloaded or uploaded as a stream of bytes.

The gateway URL the client was given may be its websocket address; ``http_url``
derives the HTTP base from it. One ``aiohttp`` session, opened on first use. A
failure is a ``TrustGraphError``: the gateway's ``{"error": {"type", "message"}}``
body as it is, or ``connection`` when the gateway cannot be reached.
"""
import json
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp

from .errors import TrustGraphError, error_from
from .socket import SOCKET_PATH, connect_failure
from .wire import TRACEPARENT, traceparent


def http_url(url: str) -> str:
    """The HTTP base for a gateway URL, without a trailing slash: ``ws://h:p/api/v1/socket``
    → ``http://h:p`` (``wss`` → ``https``; a path prefix before the socket path is kept)."""
    parts = urlsplit(url)
    scheme = {"http": "http", "https": "https", "ws": "http", "wss": "https"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise TrustGraphError("connection", f"not a gateway URL: {url!r} "
                                            "(expected e.g. http://localhost:8888/)")
    path = parts.path.rstrip("/").removesuffix(SOCKET_PATH).rstrip("/")
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class GatewayHttp:
    def __init__(self, url: str, token: str | None = None, *, connect_timeout: float,
                 traced: bool = False) -> None:
        self.url = url
        self._traced = traced
        self._base = http_url(url)
        self._query = urlsplit(url).query  # e.g. ?token=, as the socket also sends it
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        # No overall deadline: an answer streams for as long as the LLM writes; the
        # gateway ends a request whose service goes quiet (its request timeout).
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
        self._session: aiohttp.ClientSession | None = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body``; the JSON object answered."""
        async with self._posted(path, body, "application/json") as response:
            return await _json(response)

    async def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` (with ``query``); the JSON object answered."""
        async with self._posted(path, None, "application/json", query) as response:
            return await _json(response)

    async def lines(self, path: str, body: dict[str, Any]
                    ) -> AsyncGenerator[dict[str, Any], None]:
        """POST ``body``; each NDJSON line answered, as it arrives. Closing this early
        drops the connection, which cancels the request on the gateway."""
        async with self._posted(path, body, "application/x-ndjson") as response:
            if response.content_type != "application/x-ndjson":
                raise _unexpected(response, await response.read())
            try:
                async for line in response.content:
                    if line.strip():
                        yield json.loads(line)
            except aiohttp.ClientError as error:
                raise self._lost(error) from None

    async def download(self, path: str, query: dict[str, str]
                       ) -> AsyncGenerator[bytes, None]:
        """GET ``path``: the body's bytes as they arrive. Closing this early drops the
        connection."""
        async with self._sent("GET", path, query) as response:
            try:
                while data := await response.content.readany():
                    yield data
            except aiohttp.ClientError as error:
                raise self._lost(error) from None

    async def upload(self, path: str, query: dict[str, str],
                     body: AsyncIterable[bytes]) -> dict[str, Any]:
        """PUT ``body`` (streamed as it is read); the JSON object answered."""
        async with self._sent("PUT", path, query, data=body) as response:
            return await _json(response)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def endpoint(self, path: str) -> str:
        """The full URL of ``path`` (``/api/v1/query``) on this gateway."""
        return self._base + path + (f"?{self._query}" if self._query else "")

    def _posted(self, path: str, body: dict[str, Any] | None, accept: str,
                query: dict[str, str] | None = None) -> "_Posted":
        """POST ``body`` (None: GET) to ``path``."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        headers = {**self._headers, "Accept": accept}
        if self._traced and body is not None:
            headers[TRACEPARENT] = traceparent()
        url = self.endpoint(path)
        if query:
            url += ("&" if "?" in url else "?") + urlencode(query)
        request = self._session.get(url, headers=headers) if body is None \
            else self._session.post(url, json=body, headers=headers)
        return _Posted(self, request)

    def _sent(self, method: str, path: str, query: dict[str, str], **body: Any) -> "_Posted":
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        url = self.endpoint(path)
        url += ("&" if "?" in url else "?") + urlencode(query)
        return _Posted(self, self._session.request(method, url, headers=self._headers,
                                                   **body))

    def _lost(self, error: BaseException) -> TrustGraphError:
        return TrustGraphError("connection", f"the connection to the gateway at {self.url} "
                                             f"was lost: {error or type(error).__name__}")

    def _unreachable(self, reason: object) -> TrustGraphError:
        if isinstance(reason, BaseException):
            reason = str(reason) or type(reason).__name__
        return TrustGraphError("connection", f"cannot connect to the gateway at {self.url}: "
                                             f"{reason}")


class _Posted:
    """``async with``: the response once its status is known to be a success; a
    gateway error body or an unreachable gateway raises ``TrustGraphError``."""

    def __init__(self, http: GatewayHttp, request: Any) -> None:
        self._http = http
        self._request = request
        self._response: aiohttp.ClientResponse | None = None

    async def __aenter__(self) -> aiohttp.ClientResponse:
        try:
            self._response = await self._request
        except aiohttp.ClientConnectorError as error:
            raise self._http._unreachable(connect_failure(error.os_error)) from None
        except (aiohttp.ClientError, TimeoutError) as error:
            raise self._http._unreachable(error) from None
        if self._response.status >= 400:
            try:
                raise _unexpected(self._response, await self._response.read())
            finally:
                self._response.release()
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is None:
            return
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()  # left early: drop the connection, which cancels


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    data = await response.read()
    try:
        body = json.loads(data)
    except ValueError:
        raise _unexpected(response, data) from None
    if not isinstance(body, dict):
        raise _unexpected(response, data)
    return body


def _unexpected(response: aiohttp.ClientResponse, data: bytes) -> TrustGraphError:
    """The gateway's error body as it is, or what else came back, named."""
    try:
        error = json.loads(data).get("error")
    except (ValueError, AttributeError):
        error = None
    if error:
        return error_from(error)
    return TrustGraphError("connection", f"{response.url} answered HTTP {response.status} "
                                         f"{response.content_type} (is this a TrustGraph "
                                         f"gateway?)")

