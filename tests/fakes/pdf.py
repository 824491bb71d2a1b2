"""The smallest real PDF a reader has to parse: pages of text lines in Helvetica, with a
correct cross-reference table, written by hand so the tests need no PDF writer; and a PDF
bomb (`shared_stream_pdf`)."""

from __future__ import annotations

import zlib


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: list[list[str]]) -> bytes:
    """A PDF with one page per list of lines (ASCII text)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    font_id = 3 + 2 * n_pages
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    for i, lines in enumerate(pages):
        content_id = 4 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"({_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _assemble(objects)


def _assemble(objects: list[bytes]) -> bytes:
    """Objects 1..n, numbered in order, with their cross-reference table and trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def shared_stream_pdf(pages: int, text_bytes: int, tail: list[list[str]] | None = None) -> bytes:
    """A PDF bomb: `pages` pages that all draw one Flate-compressed content stream of about
    `text_bytes` of text (5 MB compresses to a few kilobytes), then the `tail` pages of
    ordinary text."""
    line = b"(knowledge bomb text knowledge bomb text knowledge bomb text knowledge bomb) Tj T*\n"
    body = b"BT /F1 12 Tf 14 TL 72 720 Td\n" + line * (text_bytes // 75) + b"ET\n"
    tail = tail or []
    total = pages + len(tail)
    font, shared = 3 + total, 4 + total
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (3 + i) for i in range(total)), total),
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
        b"/Resources << /Font << /F1 %d 0 R >> >> >>"
    )
    objects += [page % (shared, font)] * pages
    objects += [page % (shared + 1 + i, font) for i in range(len(tail))]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    packed = zlib.compress(body, 9)
    objects.append(
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"
    )
    for lines in tail:
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td", *(f"({_escape(t)}) Tj T*" for t in lines)]
        stream = "\n".join([*ops, "ET"]).encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _assemble(objects)
