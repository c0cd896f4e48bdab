"""Live training output for notebooks, without widgets or NumPy: a progress bar, a line chart, a digit grid.

    from webgrad.notebook import ProgressBar, LineChart, digit_grid
    bar = ProgressBar(steps, "training").show()
    chart = LineChart("loss", xlabel="step").show()
    for step in range(steps):
        ...
        bar.update(step + 1, loss=value)
        chart.add("train", step, value)     # redrawn in place, at most every `interval` seconds
    bar.close(); chart.close()              # final draw
    display(digit_grid(pixels, labels=labels, predictions=predictions))

Everything renders to HTML/SVG strings (`_repr_html_`), so it works in any Jupyter front end —
including JupyterLite's Pyodide kernel, where ipywidgets and matplotlib are not available offline.
`show()` displays with a display id and later redraws go through `DisplayHandle.update`, which
replaces the output in place. Redraws are throttled: each one is a message to the page, and a
training loop can produce thousands.
"""

import base64
import html
import math
import struct
import time
import zlib

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


class _Live:
    """Shared by the live views: show() once, then throttled redraws of `_repr_html_` in place."""

    interval = 0.25  # seconds between redraws (the last one is always drawn by close())

    def __init__(self):
        self._handle = None
        self._drawn_at = time.monotonic()

    def show(self):
        """Display this view (in a notebook) and return it; later changes redraw it in place."""
        from IPython.display import display

        self._handle = display(self, display_id=True)
        self._drawn_at = time.monotonic()
        return self

    def redraw(self, force=False):
        now = time.monotonic()
        if self._handle is not None and (force or now - self._drawn_at >= self.interval):
            self._handle.update(self)
            self._drawn_at = now

    def close(self):
        """Draw the final state (call when done: throttling may have skipped the last changes)."""
        self.redraw(force=True)


class ProgressBar(_Live):
    """A progress bar with a label and `key value` fields: update(done, loss=0.12, acc="93%")."""

    def __init__(self, total, label=""):
        super().__init__()
        self.total = max(int(total), 1)
        self.label = label
        self.done = 0
        self.fields = {}
        self._start = time.monotonic()

    def update(self, done, **fields):
        self.done = min(int(done), self.total)
        self.fields.update(fields)
        self.redraw(force=self.done == self.total)

    def _repr_html_(self):
        frac = self.done / self.total
        elapsed = time.monotonic() - self._start
        parts = [f"{self.done}/{self.total}", f"{elapsed:.0f} s"]
        if 0 < self.done < self.total:
            parts.append(f"ETA {elapsed / self.done * (self.total - self.done):.0f} s")
        parts += [f"{k} {_fmt(v)}" for k, v in self.fields.items()]
        text = html.escape("  ·  ".join(parts))
        return (
            f'<div class="webgrad-progress" data-done="{self.done}" data-total="{self.total}" '
            'style="font-family:monospace;font-size:13px;margin:4px 0">'
            f'<span style="display:inline-block;min-width:6em">{html.escape(self.label)}</span>'
            '<span style="display:inline-block;width:240px;height:12px;background:#e5e5e5;'
            'border-radius:3px;vertical-align:middle;overflow:hidden">'
            f'<span style="display:block;height:100%;width:{100 * frac:.1f}%;background:#2ca02c"></span></span>'
            f' <span style="vertical-align:middle">{100 * frac:3.0f}%  {text}</span></div>'
        )


class LineChart(_Live):
    """Named series of (x, y) points drawn as an SVG line chart; add(series, x, y) redraws it."""

    def __init__(self, title="", xlabel="", ylabel="", width=560, height=260, logy=False):
        super().__init__()
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.width, self.height, self.logy = width, height, logy
        self.series = {}

    def add(self, series, x, y):
        """Append a point (non-finite y values are skipped) and redraw (throttled)."""
        y = float(y)
        if math.isfinite(y) and (y > 0 or not self.logy):
            self.series.setdefault(series, []).append((float(x), y))
        self.redraw()

    @property
    def points(self):
        return sum(len(p) for p in self.series.values())

    def _repr_html_(self):
        return self.svg()

    def svg(self):
        w, h = self.width, self.height
        left, right, top, bottom = 56, 12, 26, 40
        pts = [p for ps in self.series.values() for p in ps]
        ty = math.log10 if self.logy else (lambda v: v)
        out = [f'<svg class="webgrad-chart" data-points="{len(pts)}" xmlns="http://www.w3.org/2000/svg" '
               f'width="{w}" height="{h}" viewBox="0 0 {w} {h}" style="font:11px sans-serif;background:#fff">',
               f'<text x="{w / 2}" y="16" text-anchor="middle" style="font-size:13px">{html.escape(self.title)}</text>']
        x0, x1 = _span([p[0] for p in pts] or [0, 1])
        y0, y1 = _span([ty(p[1]) for p in pts] or [0, 1])
        pad = 0.05 * (y1 - y0)  # keep the curve's extremes off the frame
        y0, y1 = y0 - pad, y1 + pad

        def sx(x):
            return left + (x - x0) / (x1 - x0) * (w - left - right)

        def sy(y):
            return h - bottom - (ty(y) - y0) / (y1 - y0) * (h - top - bottom)

        # axes and ticks
        out.append(f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" '
                   'fill="none" stroke="#999"/>')
        for t in _ticks(x0, x1):
            out.append(f'<text x="{sx(t):.1f}" y="{h - bottom + 14}" text-anchor="middle">{_fmt(t)}</text>')
        for t in _ticks(y0, y1):
            yy = h - bottom - (t - y0) / (y1 - y0) * (h - top - bottom)
            label = _fmt(10 ** t) if self.logy else _fmt(t)
            out.append(f'<line x1="{left}" x2="{w - right}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>'
                       f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end">{label}</text>')
        out.append(f'<text x="{(left + w - right) / 2}" y="{h - 6}" text-anchor="middle">{html.escape(self.xlabel)}</text>')
        out.append(f'<text x="12" y="{(top + h - bottom) / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 12 {(top + h - bottom) / 2})">{html.escape(self.ylabel)}</text>')
        # series and legend
        for i, (name, ps) in enumerate(self.series.items()):
            color = COLORS[i % len(COLORS)]
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in ps)
            if len(ps) == 1:
                out.append(f'<circle cx="{sx(ps[0][0]):.1f}" cy="{sy(ps[0][1]):.1f}" r="2.5" fill="{color}"/>')
            out.append(f'<polyline class="series" data-name="{html.escape(name)}" fill="none" stroke="{color}" '
                       f'stroke-width="1.5" points="{coords}"/>')
            lx = w - right - 110
            ly = top + 14 + 14 * i
            out.append(f'<line x1="{lx}" x2="{lx + 16}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>'
                       f'<text x="{lx + 20}" y="{ly}">{html.escape(name)}</text>')
        out.append("</svg>")
        return "".join(out)


class Html:
    """Any HTML string as a displayable object (what digit_grid returns)."""

    def __init__(self, markup):
        self.markup = markup

    def _repr_html_(self):
        return self.markup


def digit_grid(images, labels=None, predictions=None, columns=10, side=28, scale=2):
    """A grid of grey-scale images (each `side`x`side` values 0-255, a flat sequence or bytes) captioned
    with the prediction, green when it matches the label and red with the label when it does not."""
    cells = []
    for i, image in enumerate(images):
        png = base64.b64encode(png_grayscale(bytes(int(v) for v in image), side, side)).decode()
        caption, color = "", "#333"
        if predictions is not None:
            caption = f"{predictions[i]}"
            if labels is not None:
                right = predictions[i] == labels[i]
                color = "#2ca02c" if right else "#d62728"
                caption += "" if right else f" (is {labels[i]})"
        elif labels is not None:
            caption = f"{labels[i]}"
        cells.append(
            f'<div class="webgrad-digit" data-correct="{int(color == "#2ca02c")}" '
            f'style="display:inline-block;width:{side * scale + 4}px;margin:1px;text-align:center;'
            'font:11px monospace;white-space:nowrap;vertical-align:top">'
            f'<img src="data:image/png;base64,{png}" width="{side * scale}" height="{side * scale}" '
            'style="image-rendering:pixelated;display:block;margin:0 auto"/>'
            f'<span style="color:{color}">{html.escape(caption)}</span></div>'
        )
    rows = ["<div>" + "".join(cells[i:i + columns]) + "</div>" for i in range(0, len(cells), columns)]
    return Html('<div class="webgrad-digit-grid">' + "".join(rows) + "</div>")


def png_grayscale(pixels, width, height):
    """An 8-bit grey-scale PNG of `pixels` (bytes, row-major, width*height of them)."""
    if len(pixels) != width * height:
        raise ValueError(f"png_grayscale: {len(pixels)} pixels for a {width}x{height} image")
    raw = b"".join(b"\x00" + pixels[r * width:(r + 1) * width] for r in range(height))  # filter 0 per row

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit, grey, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _fmt(v):
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.2e}"
        return f"{v:.4g}"
    return str(v)


def _span(values):
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def _ticks(lo, hi, count=5):
    """About `count` round numbers between lo and hi."""
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
