"""The websocket frame filter that drops oversize frames unread (gateway/oversize.py):
whatever way the bytes are split, the frames under the limit pass through byte for
byte and each oversize frame becomes one report, with its first bytes unmasked."""
import os
import struct

import pytest
from aiohttp import WSMsgType

from trustgraph.gateway.core.oversize import FrameTooLarge, OversizeFrames

LIMIT = 1000


def frame(payload: bytes, opcode: int = 0x1, fin: bool = True, mask: bytes | None = None
          ) -> bytes:
    first = (0x80 if fin else 0) | opcode
    size = len(payload)
    masked = 0x80 if mask else 0
    if size < 126:
        header = bytes([first, masked | size])
    elif size < 65536:
        header = bytes([first, masked | 126]) + struct.pack("!H", size)
    else:
        header = bytes([first, masked | 127]) + struct.pack("!Q", size)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        header += mask
    return header + payload


class Inner:
    def __init__(self) -> None:
        self.data = b""

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.data += data
        return False, b""


class Queue:
    def __init__(self) -> None:
        self.reports: list[FrameTooLarge] = []

    def feed_data(self, message, size: int) -> None:
        assert message.type == WSMsgType.ERROR
        self.reports.append(message.data)


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("split", [1, 2, 3, 7, 64, 1 << 20])
def test_small_frames_pass_and_oversize_ones_are_reported(split):
    mask = os.urandom(4)
    big = b'{"id": "big", "request": "' + b"x" * 70_000 + b'"}'
    small = [frame(b'{"id": "a"}', mask=mask), frame(b"b" * 500, 0x2, mask=mask),
             frame(b"ping", 0x9, mask=mask), frame(b"c" * 200, fin=False, mask=mask),
             frame(b"c" * 2000, 0x0, mask=mask)]  # a fragment: passed, aiohttp's to judge
    stream = [small[0], frame(big, mask=mask), small[1], small[2],
              frame(b"y" * 1500, 0x2), small[3], small[4]]
    inner, queue = Inner(), Queue()
    parser = OversizeFrames(inner, queue, LIMIT)
    for piece in chunks(b"".join(stream), split):
        assert parser.feed_data(piece) == (False, b"")
    assert inner.data == b"".join(small)
    assert [report.size for report in queue.reports] == [len(big), 1500]
    assert queue.reports[0].head == big[:1024]
    assert queue.reports[1].head == b"y" * 1024


def test_a_frame_at_the_limit_passes():
    inner, queue = Inner(), Queue()
    data = frame(b"z" * LIMIT)
    OversizeFrames(inner, queue, LIMIT).feed_data(data)
    assert inner.data == data and not queue.reports
