// A drawing turned into an MNIST digit the way MNIST's own digits were made (LeCun, Cortes, Burges):
// the ink's bounding box is scaled, aspect kept, to fit a 20×20 box, anti-aliased (here by exact area
// averaging), then placed in a 28×28 image so that its centre of mass sits at the image's centre.

const BOX = 20, SIZE = 28;

// ink: intensities 0..255, row-major, width × height. Returns 784 uint8 values, or null if blank.
export function mnistify(ink, width, height) {
  let x0 = width, y0 = height, x1 = -1, y1 = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (ink[y * width + x] > 0) {
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
        if (y < y0) y0 = y;
        if (y > y1) y1 = y;
      }
    }
  }
  if (x1 < 0) return null;
  const bw = x1 - x0 + 1, bh = y1 - y0 + 1;
  const scale = BOX / Math.max(bw, bh);
  const tw = Math.max(1, Math.round(bw * scale)), th = Math.max(1, Math.round(bh * scale));

  // Separable area averaging: rows first (bh × tw), then columns (th × tw).
  const wx = areaWeights(bw, tw), wy = areaWeights(bh, th);
  const rows = new Float32Array(bh * tw);
  for (let y = 0; y < bh; y++) {
    const src = (y0 + y) * width + x0;
    for (let u = 0; u < tw; u++) {
      let acc = 0;
      for (const [i, w] of wx[u]) acc += w * ink[src + i];
      rows[y * tw + u] = acc;
    }
  }
  const small = new Float32Array(th * tw);
  for (let v = 0; v < th; v++) {
    for (let u = 0; u < tw; u++) {
      let acc = 0;
      for (const [j, w] of wy[v]) acc += w * rows[j * tw + u];
      small[v * tw + u] = acc;
    }
  }

  // Centre of mass (pixel centres at index + 0.5) moved to (14, 14).
  let mass = 0, mx = 0, my = 0;
  for (let v = 0; v < th; v++) {
    for (let u = 0; u < tw; u++) {
      const m = small[v * tw + u];
      mass += m;
      mx += m * (u + 0.5);
      my += m * (v + 0.5);
    }
  }
  const ox = Math.round(SIZE / 2 - mx / mass), oy = Math.round(SIZE / 2 - my / mass);
  const out = new Uint8Array(SIZE * SIZE);
  for (let v = 0; v < th; v++) {
    for (let u = 0; u < tw; u++) {
      const X = u + ox, Y = v + oy;
      if (X >= 0 && X < SIZE && Y >= 0 && Y < SIZE) out[Y * SIZE + X] = Math.min(255, Math.round(small[v * tw + u]));
    }
  }
  return out;
}

// For each of n output cells spanning `len` input cells: [[input index, weight], ...], the weights
// being the overlap of the input cell with the output cell, normalised to sum to 1.
function areaWeights(len, n) {
  const span = len / n;
  const cells = [];
  for (let u = 0; u < n; u++) {
    const a = u * span, b = (u + 1) * span;
    const list = [];
    for (let i = Math.floor(a); i < Math.min(Math.ceil(b), len); i++) {
      const overlap = Math.min(b, i + 1) - Math.max(a, i);
      if (overlap > 0) list.push([i, overlap / span]);
    }
    cells.push(list);
  }
  return cells;
}
