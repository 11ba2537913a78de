"""PDFs with a text layer, written by hand for tests (pypdf reads PDFs but cannot
write text)."""


def minimal_pdf(pages: list[list[str]], padding: int = 0) -> bytes:
    """A valid PDF with a text layer: one Helvetica text object per page, a line per
    string (pypdf reads PDFs but cannot write text); ``padding`` bytes of an unused
    stream make it as large as wanted."""
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
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(bodies) + 1, xref)
    return bytes(out)
