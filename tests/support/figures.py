"""The figure stand-in's files: what `reports.plots.save` writes in tests not marked `figures` (the switch is the
autouse fixtures of tests/conftest.py)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# What `reports.plots.save` writes in tests not marked `figures`: a valid 1x1 grey PNG and an empty SVG, the same
# bytes every time, so report links, file listings, the HTML's embedded image and byte comparisons of two runs work.
PLACEHOLDER_PNG = (
    b"\x89PNG\r\n\x1a\n"
    + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))  # 1x1, 8-bit greyscale
    + _png_chunk(b"IDAT", zlib.compress(b"\x00\x80", 9))  # one scanline: filter 0, one grey pixel
    + _png_chunk(b"IEND", b"")
)
PLACEHOLDER_SVG = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" viewBox="0 0 1 1">'
    b"<!-- not drawn: a test placeholder (tests/conftest.py) --></svg>\n"
)


def save_without_drawing(fig, out_base, *, rect=None) -> list[Path]:
    """`reports.plots.save` less the drawing (most of a report's time in the suite, docs/reliability.md issue
    21): the figure was built by the plotting code as in a real run; the same two paths come back, each holding
    a placeholder, and the figure is closed so none accumulates (`rect`, the layout's area, is not laid out)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):  # what savefig would have refused
        raise TypeError(f"plots.save needs a matplotlib Figure, got {type(fig).__name__}")
    out_base = Path(out_base)
    png, svg = out_base.with_suffix(".png"), out_base.with_suffix(".svg")
    png.write_bytes(PLACEHOLDER_PNG)
    svg.write_bytes(PLACEHOLDER_SVG)
    plt.close(fig)
    return [png, svg]
