// The drawing canvas: mouse, pen or finger (pointer events), white ink on a transparent canvas shown
// on black. onChange() is called while drawing and when cleared; ink() gives the alpha channel.

export class Sketch {
  constructor(canvas, onChange) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d", { willReadFrequently: true });
    this.onChange = onChange;
    this.last = null;
    canvas.addEventListener("pointerdown", (e) => {
      canvas.setPointerCapture(e.pointerId);
      this.last = this.point(e);
      this.stroke(this.last, this.last);
    });
    canvas.addEventListener("pointermove", (e) => {
      if (!this.last) return;
      // Coalesced events keep fast strokes smooth.
      for (const ev of e.getCoalescedEvents?.() || [e]) {
        const p = this.point(ev);
        this.stroke(this.last, p);
        this.last = p;
      }
    });
    const end = () => {
      if (this.last) onChange();
      this.last = null;
    };
    canvas.addEventListener("pointerup", end);
    canvas.addEventListener("pointercancel", end);
  }

  // Canvas coordinates of a pointer event (the canvas may be displayed at another size).
  point(e) {
    const r = this.canvas.getBoundingClientRect();
    return [(e.clientX - r.left) * this.canvas.width / r.width, (e.clientY - r.top) * this.canvas.height / r.height];
  }

  stroke([ax, ay], [bx, by]) {
    const c = this.ctx;
    // About MNIST's stroke width once the digit is scaled into its 20-pixel box.
    c.lineWidth = this.canvas.width / 13;
    c.lineCap = c.lineJoin = "round";
    c.strokeStyle = "#fff";
    c.beginPath();
    c.moveTo(ax, ay);
    c.lineTo(bx, by);
    c.stroke();
    this.onChange();
  }

  clear() {
    this.ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    this.onChange();
  }

  // A 28×28 digit (uint8) drawn scaled up, e.g. a test digit to classify.
  showDigit(pixels) {
    const { width, height } = this.canvas;
    const img = new ImageData(28, 28);
    for (let k = 0; k < 784; k++) {
      img.data.set([255, 255, 255, pixels[k]], 4 * k);
    }
    const tmp = new OffscreenCanvas(28, 28);
    tmp.getContext("2d").putImageData(img, 0, 0);
    this.ctx.clearRect(0, 0, width, height);
    this.ctx.imageSmoothingEnabled = true;
    // The digit fills the canvas the way a drawn one would (its 20-pixel box about 70% of the canvas).
    this.ctx.drawImage(tmp, 0, 0, width, height);
    this.onChange();
  }

  ink() {
    const { width, height } = this.canvas;
    const rgba = this.ctx.getImageData(0, 0, width, height).data;
    const alpha = new Uint8ClampedArray(width * height);
    for (let k = 0; k < alpha.length; k++) alpha[k] = rgba[4 * k + 3];
    return alpha;
  }
}
