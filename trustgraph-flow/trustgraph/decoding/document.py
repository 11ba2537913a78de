"""What a decoder produces: the document's text, and where its pages and sections
are in that text (character offsets), so each chunk can say where it came from."""
import bisect
from dataclasses import dataclass


class DecodeError(ValueError):
    """The content cannot be read as the kind it claims (or the kind is unsupported)."""


@dataclass(frozen=True)
class Section:
    start: int  # offsets into ``Decoded.text``, end exclusive
    end: int
    page: int | None = None  # 1-based page number (PDF)
    title: str = ""  # heading path (Markdown), e.g. "Install > From source"
    # The same path, heading by heading (Markdown headings; a PDF's outline).
    headings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decoded:
    text: str
    sections: tuple[Section, ...] = ()
    author: str = ""  # when the document says (a PDF's metadata)

    def section_at(self, offset: int) -> Section | None:
        """The section holding character ``offset`` (None outside every section)."""
        i = bisect.bisect_right([s.start for s in self.sections], offset) - 1
        if i >= 0 and offset < self.sections[i].end:
            return self.sections[i]
        return None
