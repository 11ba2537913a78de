"""What a chunk's vector is computed from: the chunk under the heading path (and,
when asked, the document title) it sits in, so "Installing > From source" helps
find a chunk that never says "install". The text shown to the LLM and the user
stays the chunk itself; the lexical index keeps title and headings in columns of
their own (storage/vectors/lexical.py)."""


def embedded_text(text: str, headings: list[str] | None = None, title: str = "") -> str:
    """``"title > heading > subheading\\n\\ntext"``, repeating nothing (a Markdown
    document's first heading is often its title); just ``text`` with no context."""
    path: list[str] = []
    for part in (title, *(headings or [])):
        part = part.strip()
        if part and (not path or path[-1].casefold() != part.casefold()):
            path.append(part)
    return f"{' > '.join(path)}\n\n{text}" if path else text
