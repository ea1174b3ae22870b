"""Line charts as inline SVG: no script, no network, the numbers in the markup (data-* attributes)."""

from __future__ import annotations

import math
from html import escape

COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c")


def line_chart(title: str, steps: list[float], series: dict[str, list[float | None]], width: int = 420,
               height: int = 180) -> str:
    """An SVG chart of each series against steps; NaN/None points are gaps.

    >>> svg = line_chart("reward", [1, 2], {"mean": [0.0, 1.0]})
    >>> svg.startswith("<svg") and 'data-series="mean"' in svg and 'data-values="0.0 1.0"' in svg
    True
    """
    finite = [v for ys in series.values() for v in ys if v is not None and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    high = high if high > low else low + 1.0
    x0, x1 = (min(steps), max(steps)) if steps else (0, 1)
    x1 = x1 if x1 > x0 else x0 + 1
    pad = 30
    sx = lambda x: pad + (x - x0) / (x1 - x0) * (width - 2 * pad)  # noqa: E731
    sy = lambda y: height - pad - (y - low) / (high - low) * (height - 2 * pad)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}">',
             f'<text x="{pad}" y="16" font-size="13">{escape(title)}</text>',
             f'<text x="2" y="{pad + 4}" font-size="10">{high:.3g}</text>',
             f'<text x="2" y="{height - pad}" font-size="10">{low:.3g}</text>']
    for i, (name, ys) in enumerate(series.items()):
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(steps, ys) if y is not None and math.isfinite(y))
        values = " ".join("nan" if y is None or not math.isfinite(y) else repr(float(y)) for y in ys)
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}" '
                     f'data-series="{escape(name)}" data-values="{values}"/>')
        parts.append(f'<text x="{width - pad - 110}" y="{16 + 12 * i}" font-size="10" fill="{colour}">'
                     f'{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
