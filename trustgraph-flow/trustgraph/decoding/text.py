"""Plain text: bytes to ``str``, line ends and stray control characters tidied."""
import re

from .document import Decoded, Section

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
# Control characters other than tab and newline carry no text and upset tokenizers.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def to_str(data: bytes) -> str:
    """UTF-8 (or UTF-16 with a byte-order mark); undecodable bytes become U+FFFD
    rather than failing a whole document over a few of them."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    return data.decode("utf-8", errors="replace")


def tidy(text: str) -> str:
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def decode_text(data: bytes) -> Decoded:
    text = tidy(to_str(data))
    return Decoded(text, (Section(0, len(text)),) if text else ())
