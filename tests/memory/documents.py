"""Small documents for the ingest tests, PDFs included (written by hand: a page's text drawn line by line)."""

from __future__ import annotations


def tiny_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A valid PDF of ``pages``, each a list of lines drawn in Helvetica, with a correct cross-reference table."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    info = f"/Title ({title})" if title else ""
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, lines in enumerate(pages):
        drawn = " ".join(f"({_escaped(line)}) Tj T*" for line in lines)
        stream = f"BT /F1 11 Tf 14 TL 72 740 Td {drawn} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(f"<< {info} >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {len(objects)} 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


HANDBOOK_MD = """# Staff handbook

Welcome to Acme. This handbook says how we work.

## Leave

Everyone gets 25 days of paid leave a year. Ask your manager two weeks ahead.

### Sick leave

Call the office before nine in the morning when you are ill.

## Expenses

Keep the receipt of every taxi ride and submit it within a month.
"""

HANDBOOK_HTML = """<!doctype html><html><head><title>Staff handbook</title><style>p {color: red}</style></head>
<body><h1>Staff handbook</h1><p>Welcome to Acme. This handbook says how we work.</p>
<h2>Leave</h2><p>Everyone gets 25 days of <b>paid leave</b> a year. Ask your manager two weeks ahead.</p>
<h3>Sick leave</h3><ul><li>Call the office before nine in the morning when you are ill.</li></ul>
<script>var leave = "not text";</script>
<h2>Expenses</h2><p>Keep the receipt of every taxi ride and submit it within a month.</p></body></html>
"""

HANDBOOK_TXT = """Staff handbook

Welcome to Acme. This handbook says how we work.

Everyone gets 25 days of paid leave a year. Ask your manager two weeks ahead.

Call the office before nine in the morning when you are ill.

Keep the receipt of every taxi ride and submit it within a month."""

HANDBOOK_PDF_PAGES = [
    ["Welcome to Acme. This handbook says how we work."],
    ["Everyone gets 25 days of paid leave a year.", "Ask your manager two weeks ahead."],
    ["Keep the receipt of every taxi ride and submit it within a month."],
]
