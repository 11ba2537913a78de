"""PDFs with a text layer, written by hand for tests (pypdf reads PDFs but cannot
write text)."""


# An outline entry: (title, 1-based page, child entries).
Bookmark = tuple[str, int, list["Bookmark"]]


def minimal_pdf(pages: list[list[str]], padding: int = 0, outline: list[Bookmark] = (),
                author: str = "") -> bytes:
    """A valid PDF with a text layer: one Helvetica text object per page, a line per
    string (pypdf reads PDFs but cannot write text); ``padding`` bytes of an unused
    stream make it as large as wanted; ``outline``: bookmarks; ``author``: the
    document information's /Author."""
    def escaped(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    first_page = 4  # objects 1-3: catalog, page tree, font; then page + contents each
    kids = " ".join(f"{first_page + 2 * i} 0 R" for i in range(len(pages)))
    bodies = [b"<< /Type /Catalog /Pages 2 0 R >>",
              f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
              b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, lines in enumerate(pages):
        bodies.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
                      f"<< /Font << /F1 3 0 R >> >> /Contents {first_page + 2 * i + 1} 0 R >>"
                      .encode())
        text = "\n".join(["BT /F1 12 Tf 14 TL 72 720 Td",
                          *(f"({escaped(line)}) Tj T*" for line in lines), "ET"])
        stream = text.encode("latin-1")
        bodies.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    if padding:
        bodies.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (padding, b"\0" * padding))
    if outline:
        root = len(bodies) + 1
        bodies.append(b"")  # the /Outlines dictionary, written once its items are
        first, last = _bookmarks(bodies, outline, root, first_page, escaped)
        bodies[root - 1] = (f"<< /Type /Outlines /First {first} 0 R /Last {last} 0 R "
                            f"/Count {len(outline)} >>").encode()
        bodies[0] = f"<< /Type /Catalog /Pages 2 0 R /Outlines {root} 0 R >>".encode()
    info = ""
    if author:
        bodies.append(f"<< /Author ({escaped(author)}) >>".encode())
        info = f" /Info {len(bodies)} 0 R"
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(bodies) + 1, info.encode(), xref)
    return bytes(out)


def _bookmarks(bodies: list[bytes], items: list[Bookmark], parent: int, first_page: int,
               escaped) -> tuple[int, int]:
    """Append one object per bookmark of ``items`` (and their children) to
    ``bodies``; returns the object numbers of the first and last."""
    numbers = []
    for _ in items:
        bodies.append(b"")
        numbers.append(len(bodies))
    for n, (title, page, children) in enumerate(items):
        links = f"/Parent {parent} 0 R"
        if n:
            links += f" /Prev {numbers[n - 1]} 0 R"
        if n + 1 < len(items):
            links += f" /Next {numbers[n + 1]} 0 R"
        if children:
            first, last = _bookmarks(bodies, children, numbers[n], first_page, escaped)
            links += f" /First {first} 0 R /Last {last} 0 R /Count {len(children)}"
        page_object = first_page + 2 * (page - 1)
        bodies[numbers[n] - 1] = (f"<< /Title ({escaped(title)}) {links} "
                                  f"/Dest [{page_object} 0 R /Fit] >>").encode()
    return numbers[0], numbers[-1]
