"""PDF: the text layer of every page, via ``pypdf``; one section per page, whose
heading path is the outline (bookmarks) entry in force where the page starts, when
the PDF has an outline; the author from the PDF's metadata.

Pure Python and CPU-bound (a large PDF takes seconds): callers on an event loop
run it in a thread. A page whose text cannot be extracted is left empty and
logged, so one bad page does not lose the document; a PDF with no text at all
(a scan, which would need OCR) is an error.
"""
import io
import logging
import re

from pypdf import PdfReader
from pypdf.errors import PyPdfError

from .document import Decoded, DecodeError, Section
from .text import tidy

log = logging.getLogger(__name__)

PAGE_BREAK = "\n\n"
# A word broken across lines ("infor-\nmation"), joined when the line after
# goes on in lower case; "well-\nKnown" and "2020-\n2021" stay as they are.
_HYPHENATED = re.compile(r"(\w)-\n(?=[a-z])")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")


def decode_pdf(data: bytes) -> Decoded:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DecodeError("the PDF is encrypted with a password")
        pages = [_page_text(page, number) for number, page in enumerate(reader.pages, 1)]
        outline, author = _outline(reader), _author(reader)
    except DecodeError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as error:
        raise DecodeError(f"not a readable PDF: {type(error).__name__}: {error}") from None
    if not any(pages):
        raise DecodeError("the PDF has no text layer (a scanned PDF needs OCR, which is "
                          "not supported)")
    parts: list[str] = []
    sections: list[Section] = []
    offset = 0
    for number, text in enumerate(pages, 1):
        if not text:
            continue
        if parts:
            parts.append(PAGE_BREAK)
            offset += len(PAGE_BREAK)
        parts.append(text)
        headings = _headings_at(outline, number)
        sections.append(Section(offset, offset + len(text), page=number,
                                title=" > ".join(headings), headings=headings))
        offset += len(text)
    return Decoded("".join(parts), tuple(sections), author=author)


def _outline(reader: PdfReader) -> list[tuple[int, tuple[str, ...]]]:
    """(page number, heading path) of each outline entry, in page order. An outline
    pypdf cannot read is logged and ignored: it only adds headings."""
    entries: list[tuple[int, tuple[str, ...]]] = []

    def walk(items, path: tuple[str, ...]) -> None:
        previous = path
        for item in items:
            if isinstance(item, list):  # the children of the entry before
                walk(item, previous)
                continue
            previous = (*path, str(item.title).strip())
            page = reader.get_destination_page_number(item)
            if page is not None and page >= 0:
                entries.append((page + 1, previous))

    try:
        walk(reader.outline, ())
    except Exception as error:  # pypdf raises many kinds on odd outlines
        log.warning("outline not read: %s: %s", type(error).__name__, error)
        return []
    return sorted(entries, key=lambda entry: entry[0])


def _headings_at(outline: list[tuple[int, tuple[str, ...]]], page: int) -> tuple[str, ...]:
    """The path of the last outline entry on or before ``page``."""
    found: tuple[str, ...] = ()
    for number, path in outline:
        if number > page:
            break
        found = path
    return found


def _author(reader: PdfReader) -> str:
    try:
        metadata = reader.metadata
        return str(metadata.get("/Author") or "").strip() if metadata else ""
    except Exception:  # a damaged info dictionary: no author
        return ""


def _page_text(page, number: int) -> str:
    try:
        text = page.extract_text() or ""
    except Exception as error:  # pypdf raises many kinds on odd content streams
        log.warning("page %d: no text extracted: %s: %s", number, type(error).__name__, error)
        return ""
    text = _TRAILING_SPACE.sub("\n", tidy(text))
    return _HYPHENATED.sub(r"\1", text).strip()
