"""Decoders: plain text, Markdown and PDF bytes to text with page/section offsets."""
import pytest

from tests.support.pdf import minimal_pdf
from trustgraph.decoding import (
    MARKDOWN,
    PDF,
    PLAIN,
    DecodeError,
    decode,
    guess_kind,
    strip_markdown,
)


def test_text_utf8_with_line_ends_and_control_characters_tidied():
    decoded = decode("Zoë\r\nsaid “hi”\rto\x00 you\x07.\n".encode(), "text/plain")
    assert decoded.text == "Zoë\nsaid “hi”\nto you.\n"
    assert [(s.start, s.end) for s in decoded.sections] == [(0, len(decoded.text))]


@pytest.mark.parametrize("data", [
    "\ufeffhello wörld".encode("utf-8"),
    "hello wörld".encode("utf-16"),  # with its byte-order mark
])
def test_text_byte_order_marks(data):
    assert decode(data, "text/plain; charset=utf-8").text == "hello wörld"


def test_text_bad_bytes_do_not_fail_the_document():
    assert decode(b"ok \xff\xfe bytes", "text/plain").text == "ok \ufffd\ufffd bytes"


def test_empty_text():
    decoded = decode(b"", "text/plain")
    assert decoded.text == "" and decoded.sections == ()


# --- Markdown -----------------------------------------------------------------------

MARKDOWN_SOURCE = """---
title: front matter is dropped
---
# Getting started

Install **TrustGraph** with *one* command, see [the guide](https://x.y/guide) and
`tg-start`. Names like snake_case_name and 2*3*4 stay as they are.

<!-- a comment that is dropped -->
![Architecture diagram](arch.png)

## Options
- first <b>option</b>
- [ ] second option
1. third option

> quoted ~~old~~ text

| name | default |
|------|--------:|
| port | 8888    |

```bash
tg-start --port 8888
```

Setext heading
--------------

Last paragraph.\\* escaped.

***

[guide]: https://x.y/guide
"""


def test_markdown_keeps_text_and_drops_markup():
    text = decode(MARKDOWN_SOURCE.encode(), "text/markdown").text
    assert text.splitlines() == [
        "Getting started", "",
        "Install TrustGraph with one command, see the guide and",
        "tg-start. Names like snake_case_name and 2*3*4 stay as they are.", "",
        "Architecture diagram", "",
        "Options", "",
        "first option", "second option", "third option", "",
        "quoted old text", "",
        "name | default",
        "port | 8888", "",
        "tg-start --port 8888", "",
        "Setext heading", "",
        "Last paragraph.* escaped.",
    ]


def test_markdown_sections_follow_the_heading_path():
    decoded = decode(MARKDOWN_SOURCE.encode(), "text/x-markdown")
    titles = [(s.title, decoded.text[s.start:s.end].split("\n")[0]) for s in decoded.sections]
    assert titles == [("Getting started", "Getting started"),
                      ("Getting started > Options", "Options"),
                      ("Getting started > Setext heading", "Setext heading")]
    options = decoded.text.index("third option")
    assert decoded.section_at(options).title == "Getting started > Options"
    ends = [s.end for s in decoded.sections]
    assert ends[-1] == len(decoded.text)


def test_markdown_text_before_the_first_heading_is_a_section_without_title():
    decoded = strip_markdown("Preface text.\n\n# One\n\nBody.")
    assert [s.title for s in decoded.sections] == ["", "One"]
    assert decoded.text[decoded.sections[0].start:decoded.sections[0].end].strip() == \
        "Preface text."


def test_markdown_code_is_kept_verbatim():
    decoded = strip_markdown("```\n# not a heading\n**not bold**\n```\n")
    assert decoded.text == "# not a heading\n**not bold**"
    assert [s.title for s in decoded.sections] == [""]


# --- PDF ----------------------------------------------------------------------------

def test_pdf_pages_become_sections():
    data = minimal_pdf([["Knowledge graphs connect entities.", "Second line (of page one)."],
                     [],  # a page with no text
                     ["Page three talks about infor-", "mation retrieval."]])
    decoded = decode(data, "application/pdf")
    assert [s.page for s in decoded.sections] == [1, 3]
    one, three = (decoded.text[s.start:s.end] for s in decoded.sections)
    assert "Knowledge graphs connect entities." in one and "(of page one)" in one
    assert three == "Page three talks about information retrieval."
    assert decoded.section_at(decoded.text.index("retrieval")).page == 3


def test_pdf_that_is_not_one():
    with pytest.raises(DecodeError, match="not a readable PDF"):
        decode(b"%PDF-1.4 this is not really a PDF", PDF)


def test_pdf_without_text_layer():
    with pytest.raises(DecodeError, match="no text layer"):
        decode(minimal_pdf([[]]), PDF)


# --- dispatch -----------------------------------------------------------------------

def test_unsupported_kind_is_a_clear_error():
    with pytest.raises(DecodeError, match="image/png"):
        decode(b"\x89PNG", "image/png")
    with pytest.raises(DecodeError):
        decode(b"<html></html>", "text/html")
    assert decode(b"a,b\n1,2\n", "text/csv").text == "a,b\n1,2\n"


@pytest.mark.parametrize("data,filename,kind", [
    (b"anything", "notes.MD", MARKDOWN),
    (b"anything", "paper.pdf", PDF),
    (b"%PDF-1.7\n...", "", PDF),
    (b"# Title\n\ntext", "", MARKDOWN),
    (b"just words", "", PLAIN),
    (b"just words", "readme.txt", PLAIN),
])
def test_guess_kind(data, filename, kind):
    assert guess_kind(data, filename) == kind
