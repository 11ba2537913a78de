"""Websocket frames too large to read, dropped without closing the socket.

aiohttp reads a whole message into memory before handing it over, and one larger
than its ``max_msg_size`` fails the connection (close 1009), taking every request in
flight on the socket with it. ``OversizeFrames`` sits in front of aiohttp's frame
parser: it follows the frame headers of the byte stream, passes every frame through
untouched, except a single-frame message longer than the limit, whose payload it
discards as it arrives (keeping its first bytes, where the id usually is) and
reports to the socket's reader as ``FrameTooLarge``. The reader answers that with a
413 error frame, as for any other frame over the limit.

Only unfragmented messages are dropped this way (browsers and the usual clients send
a message as one frame); a fragmented message over aiohttp's own limit still closes
the socket.
"""
import struct

from aiohttp import WSMessage, WSMsgType, web

HEAD_BYTES = 1024  # of a dropped frame's payload, kept to find its id
_DATA_OPCODES = (0x1, 0x2)  # text, binary


class FrameTooLarge(Exception):
    def __init__(self, size: int, head: bytes) -> None:
        super().__init__(f"a {size}-byte frame")
        self.size = size
        self.head = head


class OversizeFrames:
    """A frame parser (``feed_data`` / ``feed_eof``) wrapping aiohttp's."""

    def __init__(self, parser, queue, limit: int) -> None:
        self._parser = parser
        self._queue = queue
        self._limit = limit
        self._header = b""       # an incomplete frame header
        self._passing = 0        # payload bytes of the current frame still to pass on
        self._dropping = 0       # payload bytes of an oversize frame still to discard
        self._dropped: tuple[int, bytes, bytes | None] = (0, b"", None)  # size, head, mask

    def feed_eof(self) -> None:
        self._parser.feed_eof()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        passed: list[bytes] = []
        at = 0
        while at < len(data):
            if self._passing:
                n = min(self._passing, len(data) - at)
                passed.append(data[at:at + n])
                self._passing -= n
            elif self._dropping:
                n = min(self._dropping, len(data) - at)
                self._keep_head(data[at:at + n])
                self._dropping -= n
                if not self._dropping:
                    result = self._flush(passed)  # what came before it is read first
                    passed = []
                    if result[0]:
                        return result
                    self._report()
            else:
                n = self._read_header(data, at, passed)
            at += n
        return self._flush(passed)

    def _read_header(self, data: bytes, at: int, passed: list[bytes]) -> int:
        """Consume header bytes from ``data[at:]``; returns how many."""
        need = _header_length(self._header + data[at:at + 2])
        taken = data[at:at + need - len(self._header)]
        self._header += taken
        need = _header_length(self._header)
        if len(self._header) < need:
            return len(taken)
        header, self._header = self._header, b""
        first, second = header[0], header[1]
        size = _payload_length(header)
        if first & 0x80 and first & 0x0F in _DATA_OPCODES and size > self._limit:
            mask = header[need - 4:need] if second & 0x80 else None
            self._dropped = (size, b"", mask)
            self._dropping = size
            if not size:
                self._report()
        else:
            passed.append(header)
            self._passing = size
        return len(taken)

    def _keep_head(self, chunk: bytes) -> None:
        size, head, mask = self._dropped
        if len(head) < HEAD_BYTES:
            head += chunk[:HEAD_BYTES - len(head)]
            self._dropped = (size, head, mask)

    def _report(self) -> None:
        size, head, mask = self._dropped
        if mask is not None:
            head = bytes(b ^ mask[i % 4] for i, b in enumerate(head))
        self._queue.feed_data(WSMessage(WSMsgType.ERROR, FrameTooLarge(size, head), None), 0)

    def _flush(self, passed: list[bytes]) -> tuple[bool, bytes]:
        if not passed:
            return False, b""
        return self._parser.feed_data(b"".join(passed))


def _header_length(header: bytes) -> int:
    """Bytes in a frame header, as far as ``header`` (its first bytes) tells."""
    if len(header) < 2:
        return 2
    length = header[1] & 0x7F
    extended = 2 if length == 126 else 8 if length == 127 else 0
    return 2 + extended + (4 if header[1] & 0x80 else 0)


def _payload_length(header: bytes) -> int:
    length = header[1] & 0x7F
    if length == 126:
        return struct.unpack_from("!H", header, 2)[0]
    if length == 127:
        return struct.unpack_from("!Q", header, 2)[0]
    return length


class WebSocketResponse(web.WebSocketResponse):
    """aiohttp's websocket with ``OversizeFrames`` in front of its parser."""

    def __init__(self, *, max_frame: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self._max_frame = max_frame

    def _post_start(self, request, protocol, writer) -> None:
        super()._post_start(request, protocol, writer)
        # aiohttp installed its parser on the connection; put ours in front of it
        # (private attributes of aiohttp 3.x's server protocol, pinned by its tests).
        handler = request.protocol
        handler._payload_parser = OversizeFrames(self._parser, self._reader, self._max_frame)
