"""Decoders: a document's bytes and MIME type to its text, with page and section
offsets. Pure functions; ``decode`` dispatches on the type (``guess_kind`` names
one when none was given)."""
from .document import Decoded, DecodeError, Section
from .markdown import decode_markdown, strip_markdown
from .pdf import decode_pdf
from .text import decode_text

PLAIN, MARKDOWN, PDF = "text/plain", "text/markdown", "application/pdf"
_ALIASES = {"text/x-markdown": MARKDOWN, "application/x-pdf": PDF}
_EXTENSIONS = {".txt": PLAIN, ".text": PLAIN, ".md": MARKDOWN, ".markdown": MARKDOWN,
               ".pdf": PDF}
_REFUSED_TEXT = ("text/html", "text/rtf")  # text types whose markup would be kept as words


def decode(data: bytes, kind: str) -> Decoded:
    """``kind`` is a MIME type, parameters allowed (``text/plain; charset=utf-8``)."""
    base = kind.split(";")[0].strip().lower()
    base = _ALIASES.get(base, base)
    if base == PDF:
        return decode_pdf(data)
    if base == MARKDOWN:
        return decode_markdown(data)
    if base.startswith("text/") and base not in _REFUSED_TEXT:
        return decode_text(data)
    raise DecodeError(f"cannot decode documents of type {kind!r}; supported: "
                      f"{PLAIN} (and other text/*), {MARKDOWN}, {PDF}")


def guess_kind(data: bytes, filename: str = "") -> str:
    """The MIME type from the file name's extension, else from the content."""
    name = filename.lower()
    for extension, kind in _EXTENSIONS.items():
        if name.endswith(extension):
            return kind
    if data.startswith(b"%PDF-"):
        return PDF
    head = data[:4096].decode("utf-8", errors="ignore")
    if any(line.startswith(("# ", "## ", "```")) for line in head.splitlines()):
        return MARKDOWN
    return PLAIN


__all__ = ["MARKDOWN", "PDF", "PLAIN", "DecodeError", "Decoded", "Section", "decode",
           "decode_markdown", "decode_pdf", "decode_text", "guess_kind", "strip_markdown"]
