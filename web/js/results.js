// After each epoch: the test images with their predicted classes (mistakes highlighted), the accuracy of
// each class and the confusion matrix of the evaluated test subset, for any number of classes, with the
// class names of the dataset. A test image is a button: onPick(i) shows it in the drawing area (MNIST). Its
// accessible name is its content: the visible prediction (and "is <class>" when wrong) with a visually hidden
// lead that says what the button is, so the name holds the visible text (WCAG 2.5.3, label in name).

const MAX_MATRIX = 20; // classes up to which the confusion matrix is drawn (the per-class list always is)

export class Results {
  constructor(gridEl, confusionEl, perClassEl, onPick) {
    this.gridEl = gridEl;
    this.onPick = onPick;
    this.confusionEl = confusionEl;
    this.perClassEl = perClassEl;
    this.labels = [];
    this.pixels = null;
    this.classes = [];
    this.shape = [1, 28, 28];
  }

  // The dataset's test images (uint8, C x H x W each, planar), their true labels and the class names,
  // sent by the trainer whenever the dataset changes.
  setData({ grid_pixels: pixels, grid_labels: labels, classes, channels = 1, height = 28, width = 28 }) {
    this.pixels = pixels;
    this.labels = labels;
    this.classes = classes || Array.from({ length: 10 }, (_, i) => String(i));
    this.shape = [channels, height, width];
    const size = channels * height * width;
    this.gridEl.replaceChildren(...labels.map((label, i) => {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.addEventListener("click", () => this.onPick(i));
      const canvas = document.createElement("canvas");
      canvas.setAttribute("aria-hidden", "true");
      drawImage(canvas, pixels.subarray(i * size, (i + 1) * size), channels, height, width);
      const lead = document.createElement("span");
      lead.className = "visually-hidden lead";
      lead.textContent = `Test image of ${this.name(label)}, not predicted yet`;
      const caption = document.createElement("span");
      caption.className = "pred";
      caption.textContent = "?";
      caption.setAttribute("aria-hidden", "true");
      const joint = document.createElement("span");
      joint.className = "visually-hidden joint";
      const truth = document.createElement("span");
      truth.className = "truth";
      button.append(canvas, lead, caption, joint, truth);
      li.append(button);
      li.dataset.label = label;
      return li;
    }));
    delete this.gridEl.dataset.wrong;
    this.buildConfusion();
    this.buildPerClass();
  }

  name(k) {
    return this.classes[k] ?? String(k);
  }

  // An MNIST digit's 784 pixels (the drawing area shows it).
  digit(i) {
    return this.pixels.subarray(i * 784, (i + 1) * 784);
  }

  showPredictions(preds) {
    let wrong = 0;
    [...this.gridEl.children].forEach((li, i) => {
      const label = this.labels[i], pred = preds[i];
      const ok = pred === label;
      wrong += !ok;
      li.classList.toggle("wrong", !ok);
      li.dataset.pred = pred;
      const caption = li.querySelector(".pred");
      caption.textContent = this.name(pred);
      caption.removeAttribute("aria-hidden");
      li.querySelector(".lead").textContent = ok ? `Test image of ${this.name(label)}, predicted ` :
        "Test image, wrong: predicted ";
      li.querySelector(".joint").textContent = ok ? "" : ", ";
      li.querySelector(".truth").textContent = ok ? "" : `is ${this.name(label)}`;
      li.firstChild.title = `${this.name(label)}, predicted ${this.name(pred)}`;
    });
    this.gridEl.dataset.wrong = wrong;
  }

  buildPerClass() {
    this.perClassEl.replaceChildren(...this.classes.map((name) => {
      const li = document.createElement("li");
      li.innerHTML = '<span class="name"></span><span class="bar"><span></span></span><span class="pct">–</span>';
      li.querySelector(".name").textContent = name;
      li.querySelector(".name").title = name;
      return li;
    }));
  }

  buildConfusion() {
    const t = this.confusionEl, k = this.classes.length;
    t.hidden = k > MAX_MATRIX;
    t.tHead?.remove();
    for (const b of [...t.tBodies]) b.remove();
    if (t.hidden) return;
    const head = t.createTHead().insertRow();
    head.append(document.createElement("td"));
    for (let j = 0; j < k; j++) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = this.short(j);
      th.title = this.name(j);
      head.append(th);
    }
    const body = t.createTBody();
    for (let i = 0; i < k; i++) {
      const row = body.insertRow();
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = this.short(i);
      th.title = this.name(i);
      row.append(th);
      for (let j = 0; j < k; j++) row.insertCell().textContent = "";
    }
  }

  // A class's name cut to fit a matrix header ("airplane" -> "airp").
  short(k) {
    const name = this.name(k);
    return name.length <= 4 ? name : name.slice(0, 4);
  }

  showConfusion(matrix) {
    const items = this.perClassEl.children;
    matrix.forEach((counts, i) => {
      const total = counts.reduce((a, b) => a + b, 0);
      const li = items[i];
      if (li) {
        const acc = total ? counts[i] / total : null;
        li.querySelector(".bar span").style.width = `${100 * (acc || 0)}%`;
        li.querySelector(".pct").textContent = acc === null ? "–" : `${(100 * acc).toFixed(0)}%`;
        li.dataset.accuracy = acc === null ? "" : acc;
        li.title = `${this.name(i)}: ${counts[i]} of ${total} test images right`;
      }
    });
    if (this.confusionEl.hidden) return;
    const rows = this.confusionEl.tBodies[0].rows;
    matrix.forEach((counts, i) => {
      const total = counts.reduce((a, b) => a + b, 0) || 1;
      counts.forEach((n, j) => {
        const cell = rows[i].cells[j + 1];
        cell.textContent = n;
        const share = n / total;
        cell.style.background = n === 0 ? "" : shade(i === j, share);
        cell.title = `true ${this.name(i)}, predicted ${this.name(j)}: ${n} (${(100 * share).toFixed(1)}%)`;
      });
    });
  }
}

// A confusion matrix cell's background for `share` of its true class's samples: the diagonal green, mistakes
// red, darker with the share. The darkest shades keep a contrast of at least 4.5 with the text (WCAG AA): green
// at most 0.75 opaque, red at most 0.65.
export function shade(diagonal, share) {
  return diagonal ? `rgba(22, 163, 74, ${0.15 + 0.6 * share})` :
    `rgba(220, 38, 38, ${Math.min(0.1 + 3 * share, 0.65)})`;
}

// uint8 planar pixels (1 channel: grey, white on black like MNIST; 3: RGB) to a canvas of their size.
export function drawImage(canvas, pixels, channels, height, width) {
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(width, height);
  const plane = width * height;
  for (let k = 0; k < plane; k++) {
    const r = pixels[k], g = channels === 3 ? pixels[plane + k] : r, b = channels === 3 ? pixels[2 * plane + k] : r;
    img.data[4 * k] = r;
    img.data[4 * k + 1] = g;
    img.data[4 * k + 2] = b;
    img.data[4 * k + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

// Grey-level pixels (0 = background) to a 28x28 canvas, white on black like MNIST.
export function drawDigit(canvas, pixels) {
  drawImage(canvas, pixels, 1, 28, 28);
}
