// After each epoch: the test digits with their predicted classes (mistakes highlighted) and the
// confusion matrix of the evaluated test subset. A test digit is a button: onPick(i) shows it in the
// drawing area, to see the model's probabilities for it.

export class Results {
  constructor(gridEl, confusionEl, onPick) {
    this.gridEl = gridEl;
    this.onPick = onPick;
    this.confusionEl = confusionEl;
    this.labels = [];
    this.pixels = null;
    this.buildConfusion();
  }

  // The test digits' pixels (uint8, 784 per digit) and true labels, sent once by the trainer.
  setDigits(pixels, labels) {
    this.pixels = pixels;
    this.labels = labels;
    this.gridEl.replaceChildren(...labels.map((label, i) => {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.addEventListener("click", () => this.onPick(i));
      const canvas = document.createElement("canvas");
      canvas.width = canvas.height = 28;
      drawDigit(canvas, pixels.subarray(i * 784, (i + 1) * 784));
      const caption = document.createElement("span");
      caption.className = "pred";
      caption.textContent = "?";
      const truth = document.createElement("span");
      truth.className = "truth";
      button.append(canvas, caption, truth);
      li.append(button);
      li.dataset.label = label;
      button.setAttribute("aria-label", `test digit ${label}, not predicted yet; show it in the drawing area`);
      return li;
    }));
  }

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
      li.querySelector(".pred").textContent = String(pred);
      li.querySelector(".truth").textContent = ok ? "" : `is ${label}`;
      li.firstChild.setAttribute("aria-label",
        `test digit ${label}, predicted ${pred}${ok ? "" : ", wrong"}; show it in the drawing area`);
    });
    this.gridEl.dataset.wrong = wrong;
  }

  buildConfusion() {
    const t = this.confusionEl;
    const head = t.createTHead().insertRow();
    head.append(document.createElement("td"));
    for (let j = 0; j < 10; j++) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = j;
      head.append(th);
    }
    const body = t.createTBody();
    for (let i = 0; i < 10; i++) {
      const row = body.insertRow();
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = i;
      row.append(th);
      for (let j = 0; j < 10; j++) row.insertCell().textContent = "";
    }
  }

  showConfusion(matrix) {
    const rows = this.confusionEl.tBodies[0].rows;
    matrix.forEach((counts, i) => {
      const total = counts.reduce((a, b) => a + b, 0) || 1;
      counts.forEach((n, j) => {
        const cell = rows[i].cells[j + 1];
        cell.textContent = n;
        // Shade by the share of the true class's samples: diagonal green, mistakes red.
        const share = n / total;
        cell.style.background = n === 0 ? "" : i === j ?
          `rgba(22, 163, 74, ${0.15 + 0.6 * share})` : `rgba(220, 38, 38, ${Math.min(0.1 + 3 * share, 0.8)})`;
        cell.title = `true ${i}, predicted ${j}: ${n} (${(100 * share).toFixed(1)}%)`;
      });
    });
  }
}

// Grey-level pixels (0 = background) to a canvas, white on black like MNIST.
export function drawDigit(canvas, pixels) {
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(28, 28);
  for (let k = 0; k < 784; k++) {
    img.data[4 * k] = img.data[4 * k + 1] = img.data[4 * k + 2] = pixels[k];
    img.data[4 * k + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}
