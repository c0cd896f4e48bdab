"""The draw-a-digit panel: MNIST-style preprocessing of the drawing, live probabilities from the model."""

import numpy as np

from dashboard import classify, import_file, probabilities


def test_mnistify_centres_and_scales(app_page):
    # A 40x100 bar drawn off-centre in the 280x280 canvas: scaled to fit 20x20 (aspect kept) and moved
    # so that its centre of mass is at (14, 14) of the 28x28 image.
    got = app_page.evaluate("""async () => {
        const { mnistify } = await import("./js/mnistify.js");
        const ink = new Uint8ClampedArray(280 * 280);
        for (let y = 30; y < 130; y++) for (let x = 200; x < 240; x++) ink[y * 280 + x] = 255;
        return { digit: Array.from(mnistify(ink, 280, 280)), blank: mnistify(new Uint8ClampedArray(280 * 280), 280, 280) };
    }""")
    assert got["blank"] is None
    img = np.array(got["digit"], dtype=np.float64).reshape(28, 28)
    rows, cols = np.nonzero(img)
    assert rows.max() - rows.min() + 1 == 20 and cols.max() - cols.min() + 1 == 8
    mass = img.sum()
    cy, cx = (img.sum(1) * (np.arange(28) + 0.5)).sum() / mass, (img.sum(0) * (np.arange(28) + 0.5)).sum() / mass
    assert abs(cy - 14) <= 0.5 and abs(cx - 14) <= 0.5, (cx, cy)
    assert img.max() == 255


def test_drawing_gives_probabilities(app_page, torch_files):
    page = app_page
    assert page.inner_text("#guess") == "Draw a digit."
    assert "Imported" in import_file(page, torch_files["mlp"][0])

    # A vertical stroke with the mouse: a "1".
    page.locator("#sketch").scroll_into_view_if_needed()  # the mouse only reaches what is on screen
    box = page.locator("#sketch").bounding_box()
    x = box["x"] + box["width"] * 0.5

    def draw():
        page.mouse.move(x, box["y"] + box["height"] * 0.15)
        page.mouse.down()
        for k in range(1, 11):
            page.mouse.move(x + k * 0.5, box["y"] + box["height"] * (0.15 + 0.07 * k))
        page.mouse.up()

    probs = classify(page, draw)
    assert probs is not None and len(probs) == 10
    assert abs(sum(probs) - 1) < 1e-5 and min(probs) >= 0
    assert int(np.argmax(probs)) == 1, probs
    assert "reads a 1" in page.inner_text("#guess")
    preview = page.evaluate("""Array.from(document.getElementById('sketch-28').getContext('2d')
        .getImageData(0, 0, 28, 28).data.filter((_, i) => i % 4 === 0))""")
    assert max(preview) > 200 and sum(v > 0 for v in preview) > 20  # the 28x28 digit the model saw

    # Keyboard: focus the test-digit button and press Enter.
    page.focus("#sample")
    probs = classify(page, lambda: page.keyboard.press("Enter"))
    assert abs(sum(probs) - 1) < 1e-5
    assert probabilities(page) == probs

    page.click("#clear")  # a blank drawing is answered on the page, without asking the model
    assert page.evaluate("document.getElementById('probs').dataset.state") == "empty"
    assert page.inner_text("#guess") == "Draw a digit."
