"""A PNG of the results: output throughput and median TTFT versus concurrency (or arrival rate),
one line per system measured.

Drawn with Pillow (already a dependency) rather than matplotlib, which the appliance does not ship.
Concurrency (or rate) is on a log axis, so 1, 4, 16, 64 are evenly spaced.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from appliance.tools.bench.metrics import LevelMetrics
from appliance.tools.bench.report import RAW, Report

__all__ = ["write_plot"]

_PANEL_W, _PANEL_H = 560, 400
_MARGIN_L, _MARGIN_R, _MARGIN_T, _MARGIN_B = 70, 20, 40, 50
_COLOURS = ((31, 119, 180), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75), (227, 119, 194))
_RAW_COLOUR = (255, 127, 14)


def write_plot(report: Report, path: Path) -> None:
    """Write a two-panel PNG for `report` to `path`."""
    image = Image.new("RGB", (2 * _PANEL_W, _PANEL_H + 30), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    draw.text((10, 8), f"appliance bench: {report.model}", fill="black", font=font)
    panels: list[tuple[str, Callable[[LevelMetrics], float]]] = [
        ("output throughput (tokens/s)", lambda m: m.output_throughput),
        ("TTFT median (ms)", lambda m: m.ttft_ms.median),
    ]
    for index, (title, value) in enumerate(panels):
        _panel(draw, font, index * _PANEL_W, 30, title, report, value)
    image.save(path, format="PNG")


def _panel(
    draw: ImageDraw.ImageDraw,
    font: ImageFont.ImageFont,
    left: int,
    top: int,
    title: str,
    report: Report,
    value: Callable[[LevelMetrics], float],
) -> None:
    xs = [level.load.x for level in report.levels]
    names = list(dict.fromkeys(name for level in report.levels for name in level.runs))
    series = {
        name: [(level.load.x, value(level.runs[name].metrics)) for level in report.levels if name in level.runs]
        for name in names
    }
    colours = {
        name: _RAW_COLOUR if name == RAW else _COLOURS[i % len(_COLOURS)]
        for i, name in enumerate(n for n in names if n != RAW)
    } | ({RAW: _RAW_COLOUR} if RAW in names else {})
    finite = [y for points in series.values() for _, y in points if not math.isnan(y)]
    y_max = _nice_ceiling(max(finite, default=1.0))
    x0, x1 = left + _MARGIN_L, left + _PANEL_W - _MARGIN_R
    y0, y1 = top + _PANEL_H - _MARGIN_B, top + _MARGIN_T
    log_lo, log_hi = math.log(min(xs)), math.log(max(xs))
    open_loop = any(level.load.open_loop for level in report.levels)

    def px(x: float) -> float:
        span = log_hi - log_lo
        return (x0 + x1) / 2 if span == 0 else x0 + (math.log(x) - log_lo) / span * (x1 - x0)

    def py(y: float) -> float:
        return y0 - y / y_max * (y0 - y1)

    draw.text((x0, top + 10), title, fill="black", font=font)
    draw.rectangle((x0, y1, x1, y0), outline="black")
    for step in range(6):
        y = y_max * step / 5
        draw.line((x0, py(y), x1, py(y)), fill=(225, 225, 225))
        draw.text((left + 5, py(y) - 6), _label(y), fill="black", font=font)
    for x in xs:
        draw.line((px(x), y0, px(x), y0 + 4), fill="black")
        draw.text((px(x) - 6, y0 + 8), f"{x:g}", fill="black", font=font)
    axis = "arrival rate (requests/s)" if open_loop else "concurrency"
    draw.text(((x0 + x1) / 2 - 30, y0 + 26), axis, fill="black", font=font)
    for row, name in enumerate(names):
        colour = colours[name]
        points = [(px(x), py(y)) for x, y in series[name] if not math.isnan(y)]
        if not points:
            continue
        if len(points) > 1:
            draw.line(points, fill=colour, width=3)
        for x, y in points:
            draw.ellipse((x - 4, y - 4, x + 4, y + 4), fill=colour)
        legend_x = x1 - 30 - 6 * max(len(n) for n in names)
        draw.line((legend_x - 25, y1 + 14 + 16 * row, legend_x - 5, y1 + 14 + 16 * row), fill=colour, width=3)
        draw.text((legend_x, y1 + 8 + 16 * row), name, fill="black", font=font)


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is >= value (a readable axis top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"
