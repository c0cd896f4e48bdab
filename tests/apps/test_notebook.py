"""webgrad.notebook: the widget-free renderers the notebooks draw live training output with."""

import re
import struct
import zlib

from webgrad.notebook import LineChart, ProgressBar, digit_grid, png_grayscale


class FakeHandle:
    """Stands in for IPython's DisplayHandle: records what each redraw would send to the page."""

    def __init__(self):
        self.updates = []

    def update(self, obj):
        self.updates.append(obj._repr_html_())


def decode_png(data):
    """(width, height, rows) of an 8-bit grey-scale PNG without filters (what png_grayscale writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks[kind] = body
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, color) == (8, 0) and b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    rows = [raw[r * (width + 1):(r + 1) * (width + 1)] for r in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, [row[1:] for row in rows]


def test_png_round_trips():
    pixels = bytes((x * 9 + y * 5) % 256 for y in range(28) for x in range(28))
    width, height, rows = decode_png(png_grayscale(pixels, 28, 28))
    assert (width, height) == (28, 28)
    assert b"".join(rows) == pixels


def test_line_chart_draws_every_point_of_every_series():
    chart = LineChart("loss", xlabel="step")
    for step in range(50):
        chart.add("train", step, 1.0 / (step + 1))
    chart.add("test", 49, 0.05)
    chart.add("train", 50, float("nan"))  # skipped, not drawn as a gap or an error
    svg = chart.svg()
    assert chart.points == 51
    assert 'data-points="51"' in svg
    lines = dict(re.findall(r'data-name="(\w+)"[^>]*points="([^"]*)"', svg))
    assert len(lines["train"].split()) == 50 and len(lines["test"].split()) == 1
    xs = [float(p.split(",")[0]) for p in lines["train"].split()]
    ys = [float(p.split(",")[1]) for p in lines["train"].split()]
    assert xs == sorted(xs) and ys == sorted(ys)  # step grows to the right, loss falls (SVG y grows down)


def test_log_chart_and_empty_chart_render():
    chart = LineChart("loss", logy=True)
    assert "<svg" in chart.svg() and chart.points == 0
    chart.add("a", 0, 10.0)
    chart.add("a", 1, 0.0)  # no log of 0: skipped
    chart.add("a", 2, 0.1)
    assert chart.points == 2 and "1e+01" not in chart.svg()


def test_progress_bar_shows_progress_and_fields():
    bar = ProgressBar(200, "epoch 1")
    bar.update(50, loss=0.123456, rate="1,000/s")
    markup = bar._repr_html_()
    assert 'data-done="50"' in markup and "width:25.0%" in markup
    assert "loss 0.1235" in markup and "rate 1,000/s" in markup and "epoch 1" in markup
    bar.update(500)
    assert bar.done == 200


def test_redraws_are_throttled_but_the_end_is_always_drawn():
    chart = LineChart()
    chart._handle = handle = FakeHandle()
    chart.interval = 3600  # nothing redraws on its own during this test
    for step in range(100):
        chart.add("train", step, step)
    assert handle.updates == []
    chart.close()
    assert len(handle.updates) == 1 and 'data-points="100"' in handle.updates[0]
    bar = ProgressBar(10)
    bar._handle = FakeHandle()
    bar.interval = 3600
    for done in range(1, 11):
        bar.update(done)
    assert len(bar._handle.updates) == 1 and 'data-done="10"' in bar._handle.updates[0]  # reaching the end


def test_digit_grid_marks_right_and_wrong_predictions():
    images = [bytes([i * 20] * 784) for i in range(12)]
    labels = list(range(12))
    predictions = [p if p % 5 else p + 1 for p in labels]  # 0, 5 and 10 are wrong
    markup = digit_grid(images, labels=labels, predictions=predictions, columns=5)._repr_html_()
    assert markup.count("<img") == 12
    assert markup.count('data-correct="0"') == 3 and "(is 5)" in markup
    assert markup.count("<div><div") == 3  # 3 rows of at most 5
