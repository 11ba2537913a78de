"""Markdown: keep the words, drop the markup that only adds noise to retrieval.

Line by line with regular expressions, not a full Markdown parser: headings lose
their ``#`` and become sections (title = the path of headings above), links and
images keep their text, emphasis/inline-code/strike markers and HTML tags go,
code blocks keep their code but lose their fences, and rules, table separator
rows, link definitions and YAML front matter are dropped. What a regex cannot do
cheaply (nested constructs, HTML blocks' structure) is left as text.
"""
import re

from .document import Decoded, Section
from .text import tidy, to_str

_FRONT_MATTER = re.compile(r"\A---\n.*?\n(---|\.\.\.)\n", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})(?:\s+(.*?))?(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$")
_QUOTE = re.compile(r"^(\s*>)+\s?")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")

_INLINE = [
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # image: its alt text
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # link: its text
    (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"),  # reference link
    (re.compile(r"<((?:https?|mailto):[^>\s]+)>"), r"\1"),  # autolink
    (re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"), ""),  # HTML tag
    (re.compile(r"(`+)(.+?)\1"), r"\2"),  # inline code
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # strong
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),  # emphasis
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), r"\1"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),  # strikethrough
    (re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])"), r"\1"),  # escapes
]


def decode_markdown(data: bytes) -> Decoded:
    return strip_markdown(tidy(to_str(data)))


def strip_markdown(source: str) -> Decoded:
    source = _COMMENT.sub("", _FRONT_MATTER.sub("", source))
    lines = source.split("\n")
    out = _Output()
    fence, underline = "", False
    for i, line in enumerate(lines):
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            else:
                out.line(line)
            continue
        if underline:  # of the setext heading on the line before
            underline = False
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            continue
        following = lines[i + 1] if i + 1 < len(lines) else ""
        heading = _ATX.match(line)
        if heading:
            out.heading(len(heading.group(1)), _inline(heading.group(2) or ""))
        elif _is_setext_heading(line, following):
            out.heading(1 if following.strip().startswith("=") else 2, _inline(line.strip()))
            underline = True
        elif _RULE.match(line):
            out.line("")
        elif _TABLE_RULE.match(line) or _LINK_DEFINITION.match(line):
            continue
        else:
            out.line(_inline(_block_markers(line)))
    return out.decoded()


def _is_setext_heading(line: str, following: str) -> bool:
    return bool(line.strip() and _SETEXT.match(following) and not _QUOTE.match(line)
                and not _LIST_ITEM.match(line) and not _TABLE_RULE.match(line)
                and not _RULE.match(line))


def _block_markers(line: str) -> str:
    line = _LIST_ITEM.sub(r"\1", _QUOTE.sub("", line))
    if line.lstrip().startswith("|"):  # a table row: cells kept, separated by " | "
        line = " | ".join(c.strip() for c in line.strip().strip("|").split("|"))
    return line


def _inline(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text


class _Output:
    """The text being built, and the sections its headings open."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.path: list[tuple[int, str]] = []  # (level, title) of the headings above
        self.sections: list[Section] = []
        self.section_start = 0

    def line(self, text: str) -> None:
        if not text.strip():
            if not self.parts or self.parts[-1] == "\n":
                return  # one blank line is as good as several
            text = ""
        self.parts.append(text + "\n")
        self.length += len(text) + 1

    def heading(self, level: int, title: str) -> None:
        self._close_section()
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, title.strip()))
        if self.parts and self.parts[-1] != "\n":
            self.line("")  # a heading starts a paragraph of its own
        self.section_start = self.length
        self.line(title.strip())
        self.line("")

    def _close_section(self) -> None:
        if self.length > self.section_start:
            headings = tuple(t for _, t in self.path if t)
            self.sections.append(Section(self.section_start, self.length,
                                         title=" > ".join(headings), headings=headings))

    def decoded(self) -> Decoded:
        self._close_section()
        text = "".join(self.parts)
        stripped = text.rstrip()
        sections = tuple(Section(s.start, min(s.end, len(stripped)), s.page, s.title,
                                 s.headings)
                         for s in self.sections if s.start < len(stripped))
        return Decoded(stripped, sections)
