"""The knowledge-core file (docs/knowledge-cores.md): a gzip-compressed tar, written and
read as a stream, a member at a time, so neither side ever holds a whole core.

Members, in this order::

    manifest.json            what the core is (``manifest``)
    documents/000001.jsonl   the rows of each part, a page per member (schema/cores.py)
    chunks/000001.jsonl      …
    chunks/000001.f32        the vectors of the page before: little-endian float32,
    entities/000001.jsonl    row after row (``dimension`` values each)
    entities/000001.f32
    triples/000001.jsonl

Any tar tool lists and extracts it (``tar xzf core.tgz``); ``numpy.fromfile(path,
"<f4").reshape(-1, dimension)`` reads a vectors member.
"""
import io
import json
import tarfile
import time
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

from .cores import CorePart

FORMAT = "trustgraph-core"
VERSION = 1  # a reader refuses a core of a higher version than its own
MANIFEST = "manifest.json"
PARTS: tuple[CorePart, ...] = ("documents", "chunks", "entities", "triples")
VECTOR_PARTS: tuple[CorePart, ...] = ("chunks", "entities")
MAX_MEMBER_BYTES = 256 * 1024 * 1024  # a member is held whole while it is read
BLOCK = 512
GZIP = 31  # zlib's window bits for the gzip container


class CoreFormatError(ValueError):
    """The stream is not a knowledge core this reader understands."""


def manifest(user: str, collection: str, embedding_model: str | None, dimension: int,
             counts: dict[str, int]) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": {"user": user, "collection": collection},
            "embedding_model": embedding_model, "dimension": dimension,
            "parts": list(PARTS), "counts": counts}


def checked_manifest(data: bytes) -> dict[str, Any]:
    """The manifest, if this reader understands the core it describes."""
    try:
        value = json.loads(data)
    except ValueError as error:
        raise CoreFormatError(f"{MANIFEST} is not JSON: {error}") from None
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise CoreFormatError(f"not a knowledge core ({MANIFEST} has no \"format\": "
                              f"\"{FORMAT}\")")
    version = value.get("version")
    if not isinstance(version, int) or version < 1:
        raise CoreFormatError(f"{MANIFEST}: version {version!r} is not a version")
    if version > VERSION:
        raise CoreFormatError(f"the core is of format version {version}; this release "
                              f"reads versions up to {VERSION}: upgrade to import it")
    counts, model = value.get("counts", {}), value.get("embedding_model")
    if not isinstance(counts, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for n in counts.values()):
        raise CoreFormatError(f"{MANIFEST}: counts must be an object of part: records")
    if model is not None and not isinstance(model, str):
        raise CoreFormatError(f"{MANIFEST}: embedding_model must be a string or null")
    return value


def member_name(part: str, page: int, vectors: bool = False) -> str:
    return f"{part}/{page:06}.{'f32' if vectors else 'jsonl'}"


def parse_member_name(name: str) -> tuple[CorePart, int, bool] | None:
    """(part, page, is vectors) of a page member; None for any other member."""
    part, _, file = name.partition("/")
    page, _, kind = file.partition(".")
    if part not in PARTS or not page.isdigit() or kind not in ("jsonl", "f32"):
        return None
    return cast(CorePart, part), int(page), kind == "f32"


class CoreWriter:
    """Members in, gzip bytes out: ``member`` returns what to send for each, ``end``
    what closes the file. Compression is CPU work (~1 s per 100 MB): callers on an
    event loop run ``member`` in a thread for large members (zlib lets go of the GIL)."""

    def __init__(self, level: int = 1) -> None:
        # Level 1: the vectors, most of a core, barely compress at any level (~7 %),
        # and the text compresses nearly as well as at 6 in a third of the time.
        self._gzip = zlib.compressobj(level, zlib.DEFLATED, GZIP)
        self._mtime = int(time.time())

    def member(self, name: str, data: bytes) -> bytes:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), self._mtime, 0o644
        padding = -len(data) % BLOCK
        header = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")
        return (self._gzip.compress(header) + self._gzip.compress(data)
                + self._gzip.compress(b"\0" * padding))

    def end(self) -> bytes:
        return self._gzip.compress(b"\0" * (2 * BLOCK)) + self._gzip.flush()


class CoreReader:
    """Gzip bytes in, whole members out: ``feed`` returns the members completed by
    each piece of the stream, ``end`` checks the stream ended where a core ends."""

    def __init__(self) -> None:
        self._gzip = zlib.decompressobj(GZIP)
        self._buffer = bytearray()
        self._header: tarfile.TarInfo | None = None  # of the member being read
        self._long_name: str | None = None  # from a PAX or GNU long-name member
        self._ended = False  # the tar's end blocks were read

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        self._buffer += self._inflate(data)
        return list(self._members())

    def end(self) -> None:
        if not self._gzip.eof:
            raise CoreFormatError("the core ends early (its gzip stream is cut short)")
        if not self._ended:
            raise CoreFormatError("the core ends early (its tar has no end)")

    def _inflate(self, data: bytes) -> bytes:
        out = bytearray()
        try:
            while data:
                if self._gzip.eof:  # the next member of a concatenated gzip stream
                    self._gzip = zlib.decompressobj(GZIP)
                out += self._gzip.decompress(data)
                data = self._gzip.unused_data if self._gzip.eof else b""
        except zlib.error as error:
            raise CoreFormatError(f"not a gzip-compressed core: {error}") from None
        return bytes(out)

    def _members(self) -> Iterator[tuple[str, bytes]]:
        while not self._ended:
            if self._header is None:
                if len(self._buffer) < BLOCK:
                    return
                block = bytes(self._buffer[:BLOCK])
                del self._buffer[:BLOCK]
                if block == b"\0" * BLOCK:
                    self._ended = True
                    return
                self._header = _header(block)
            size = self._header.size
            stored = size + (-size % BLOCK)
            if len(self._buffer) < stored:
                return
            data = bytes(self._buffer[:size])
            del self._buffer[:stored]
            header, self._header = self._header, None
            if (member := self._member(header, data)) is not None:
                yield member

    def _member(self, header: tarfile.TarInfo, data: bytes) -> tuple[str, bytes] | None:
        kind = header.type
        if kind == tarfile.GNUTYPE_LONGNAME:
            self._long_name = data.rstrip(b"\0").decode("utf-8", "replace")
        elif kind == tarfile.XHDTYPE:
            self._long_name = _pax_path(data) or self._long_name
        elif kind in tarfile.REGULAR_TYPES:
            name, self._long_name = self._long_name or header.name, None
            return name.removeprefix("./"), data
        else:
            self._long_name = None  # a directory, a link, a global header: not ours
        return None


def _header(block: bytes) -> tarfile.TarInfo:
    try:
        header = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
    except tarfile.HeaderError as error:
        raise CoreFormatError(f"not a tar of a core: {error}") from None
    if header.size > MAX_MEMBER_BYTES:
        raise CoreFormatError(f"member {header.name!r} is {header.size} bytes, over the "
                              f"{MAX_MEMBER_BYTES} a member of a core may have")
    return header


def _pax_path(data: bytes) -> str | None:
    """The ``path`` record of a PAX extended header (``<length> <key>=<value>\\n``)."""
    records = io.BytesIO(data)
    while line := records.readline():
        _, _, record = line.partition(b" ")
        key, _, value = record.rstrip(b"\n").partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "replace")
    return None
