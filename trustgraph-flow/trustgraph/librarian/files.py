"""Durable file writes for the library: a file is written aside and fsynced before it
is renamed into place, and new directories are fsynced into their parents, so what
a commit names survives a power loss."""
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path


def read_parts(parts: list[Path], digest) -> Iterator[bytes]:
    for part in parts:
        with open(part, "rb") as file:
            while block := file.read(1024 * 1024):
                digest.update(block)
                yield block


def write_aside(path: Path, blocks: Iterable[bytes]) -> Path:
    """A new file next to ``path`` holding ``blocks``, fsynced."""
    aside = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(aside, "wb") as file:
            for block in blocks:
                file.write(block)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        aside.unlink(missing_ok=True)
        raise
    return aside


def ensure_dir(path: Path) -> None:
    """Creates ``path`` (and parents) so that the new entries survive a power loss."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_dir(directory.parent)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
