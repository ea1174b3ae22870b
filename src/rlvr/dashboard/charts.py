"""Line charts as inline SVG: no script, no network, the numbers in the markup.

Each chart has a y axis and an x axis (steps, or minutes of wall-clock) with tick values, one line per
series with its name in a legend below, and a dot per point whose value shows on hover (CSS, `CHART_CSS`;
a native tooltip too). Every series also carries its values in `data-values`, for tests and tools.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
# hover: a point's value appears beside it while the pointer is on it
CHART_CSS = (".pt .tip{visibility:hidden;pointer-events:none;paint-order:stroke;stroke:#fff;stroke-width:3px} "
             ".pt:hover .tip{visibility:visible} .pt circle{cursor:crosshair} .chart .grid{stroke:#e5e7eb} "
             ".chart .axis{stroke:#6b7280}")
LEFT, RIGHT, TOP, BOTTOM, LEGEND_ROW = 52, 14, 26, 36, 14


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2 or 5 × 10^k apart) covering [low, high].

    >>> nice_ticks(0, 1)
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> nice_ticks(1, 40)
    [0.0, 10.0, 20.0, 30.0, 40.0]
    """
    if not high > low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    if not 0 < raw < math.inf:  # a range too narrow or too wide for round steps (a metric near 1e-320, or 1e308)
        return [low, high]
    power = 10 ** math.floor(math.log10(raw))
    step = float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))
    first = math.floor(low / step) * step
    return [round(first + i * step, 12) for i in range(math.ceil((high - first) / step - 1e-9) + 1)]


def tick_label(value: float) -> str:
    """
    >>> tick_label(20.0), tick_label(0.25), tick_label(1234567.0), tick_label(float("inf"))
    ('20', '0.25', '1.23e+06', 'inf')
    """
    if not math.isfinite(value):
        return str(value)
    return f"{value:.3g}" if value != int(value) or abs(value) >= 1e6 else str(int(value))


def around(value: float) -> list[float]:
    """Three ticks centred on the only value of an axis, apart by 1, or by half the value when 1 is too small
    a change to make a difference to it.

    >>> around(3.0), around(1e17)
    ([2.0, 3.0, 4.0], [5e+16, 1e+17, 1.5e+17])
    """
    pad = 1.0 if abs(value) < 2**52 else abs(value) / 2
    return [value - pad, value, value + pad]


def line_chart(title: str, xs: list[float], series: dict[str, list[float | None]], *, x_label: str = "step",
               width: int = 460, height: int = 230) -> str:
    """An SVG chart of each series against `xs`; NaN/None points are gaps.

    >>> svg = line_chart("reward", [1, 2], {"mean": [0.0, 1.0]})
    >>> svg.startswith("<svg") and 'data-series="mean"' in svg and 'data-values="0.0 1.0"' in svg
    True
    """
    finite = [v for ys in series.values() for v in ys if v is not None and math.isfinite(v)]
    y_ticks = nice_ticks(min(finite), max(finite)) if finite else [0.0, 1.0]
    y_ticks = y_ticks if len(y_ticks) > 1 else around(y_ticks[0])
    x_ticks = nice_ticks(min(xs), max(xs), 6) if xs else [0.0, 1.0]
    x_ticks = x_ticks if len(x_ticks) > 1 else around(x_ticks[0])
    plot_h = height - TOP - BOTTOM
    total_h = height + LEGEND_ROW * len(series)
    (x0, x1), (y0, y1) = (x_ticks[0], x_ticks[-1]), (y_ticks[0], y_ticks[-1])
    sx: Callable[[float], float] = lambda x: LEFT + (x - x0) / (x1 - x0) * (width - LEFT - RIGHT)  # noqa: E731
    sy: Callable[[float], float] = lambda y: TOP + plot_h - (y - y0) / (y1 - y0) * plot_h  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{total_h}" '
             f'role="img" aria-label="{escape(title)}">',
             f'<text x="{LEFT}" y="15" font-size="13" font-weight="bold">{escape(title)}</text>']
    parts += _axes(x_ticks, y_ticks, sx, sy, x_label, width, height)
    dots = []  # drawn after every line, so that no line covers a point to hover
    for i, (name, ys) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        points = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y)]
        values = " ".join("nan" if y is None or not math.isfinite(y) else repr(float(y)) for y in ys)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{" ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)}" '
                     f'data-series="{escape(name)}" data-values="{values}"/>')
        dots += [_point(name, x, y, sx(x), sy(y), colour, x_label) for x, y in points]
        legend_y = height + LEGEND_ROW * i
        parts.append(f'<g class="legend" data-series="{escape(name)}"><line x1="{LEFT}" x2="{LEFT + 18}" '
                     f'y1="{legend_y - 4}" y2="{legend_y - 4}" stroke="{colour}" stroke-width="2.5"/>'
                     f'<text x="{LEFT + 24}" y="{legend_y}" font-size="11">{escape(name)}</text></g>')
    return "".join([*parts, *dots, "</svg>"])


def _axes(x_ticks: list[float], y_ticks: list[float], sx: Callable[[float], float], sy: Callable[[float], float],
          x_label: str, width: int, height: int) -> list[str]:
    """Grid lines, the two axes, their tick values and the x axis's name."""
    bottom, right = height - BOTTOM, width - RIGHT
    parts = []
    for y in y_ticks:
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>'
                     f'<text class="y-tick" x="{LEFT - 5}" y="{sy(y) + 3.5:.1f}" font-size="10" '
                     f'text-anchor="end">{tick_label(y)}</text>')
    for x in x_ticks:
        parts.append(f'<line class="axis" x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{bottom}" y2="{bottom + 4}"/>'
                     f'<text class="x-tick" x="{sx(x):.1f}" y="{bottom + 15}" font-size="10" '
                     f'text-anchor="middle">{tick_label(x)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}"/>'
                 f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}"/>'
                 f'<text class="x-label" x="{(LEFT + right) / 2:.1f}" y="{bottom + 29}" font-size="11" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    return parts


def _point(name: str, x: float, y: float, px: float, py: float, colour: str, x_label: str) -> str:
    """A dot whose value shows on hover: the text beside it (CSS) and a native tooltip."""
    value = f"{y:.4g}"
    where = f"{x_label} {tick_label(x) if x_label == 'step' else f'{x:.2f}'}"
    anchor = "end" if px > 300 else "start"
    return (f'<g class="pt" data-series="{escape(name)}" data-x="{x!r}" data-y="{float(y)!r}">'
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"><title>{escape(name)}, {escape(where)}: '
            f'{value}</title></circle><text class="tip" x="{px + (-6 if anchor == "end" else 6):.1f}" '
            f'y="{py - 6:.1f}" font-size="11" text-anchor="{anchor}">'
            f"{escape(name)}: {value} ({escape(where)})</text></g>")
