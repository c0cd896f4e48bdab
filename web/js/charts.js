// Live charts with uPlot: training loss per step (one point per loss read-back) and, for images, test accuracy
// per epoch, or for a text (a GPT), the validation loss at each sample. Each chart follows its container's
// width. The point count is mirrored in data-points on the container (tests read it). For a text the loss
// chart also draws the text's unigram entropy: the loss of a model that knows only how often each token
// occurs, which a model beats by using the context.

import uPlot from "../vendor/uplot/uPlot.esm.js";

const HEIGHT = 220;

function makeChart(el, { label, xLabel, color, points, yRange, xWhole, fmt, reference }) {
  const data = reference == null ? [[], []] : [[], [], []];
  const series = [
    { label: xLabel },
    { label, stroke: color, width: 2, fill: color + "18", points: { show: points, size: 6, fill: color },
      value: (u, v) => (v == null ? "–" : fmt(v)) },
  ];
  if (reference != null) {
    series.push({ label: `unigram entropy ${reference.toFixed(2)}`, stroke: "#6b7280", width: 1.5, dash: [6, 4],
      points: { show: false }, value: () => reference.toFixed(2) });
  }
  const opts = {
    width: Math.max(el.clientWidth, 200),
    height: HEIGHT,
    legend: { live: false },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: xWhole ? { time: false, range: (u, min, max) => [0, Math.max(max ?? 1, 1)] } : { time: false },
      y: yRange ? { range: yRange } : {},
    },
    axes: [
      // xWhole: epochs are whole numbers, so are the ticks
      { label: xLabel, size: 40, stroke: "#555", ...(xWhole ? { incrs: [1, 2, 5, 10, 20, 50] } : {}) },
      { label, size: 56, stroke: "#555", values: (u, ticks) => ticks.map(fmt) },
    ],
    series,
  };
  el.replaceChildren();
  const plot = new uPlot(opts, data, el);
  const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(el.clientWidth, 200), height: HEIGHT }));
  resize.observe(el);
  let queued = false;
  return {
    add(x, y) {
      data[0].push(x);
      data[1].push(y);
      if (reference != null) data[2].push(reference);
      el.dataset.points = data[1].length;
      if (!queued) { // redraw at most once per frame
        queued = true;
        requestAnimationFrame(() => { queued = false; plot.setData(data); });
      }
    },
    clear() {
      for (const column of data) column.length = 0;
      el.dataset.points = 0;
      plot.setData(data);
    },
    destroy() {
      resize.disconnect();
      plot.destroy();
      el.dataset.points = 0;
    },
  };
}

const LOSS = { label: "loss", xLabel: "step", color: "#2563eb", points: false, fmt: (v) => v.toFixed(v < 1 ? 2 : 1) };
const ACCURACY = { label: "test accuracy", xLabel: "epoch", color: "#15803d", points: true, xWhole: true,
  yRange: (u, min, max) => [Math.min(Math.floor((min ?? 90) / 10) * 10, 90), 100],
  fmt: (v) => `${v.toFixed(v % 1 ? 1 : 0)}%` };
const VAL_LOSS = { label: "validation loss", xLabel: "step", color: "#15803d", points: true, fmt: (v) => v.toFixed(2) };

export class Charts {
  // lossEl, accEl: the charts' containers; accCaption: the second chart's caption (it names what it shows).
  constructor(lossEl, accEl, accCaption) {
    this.lossEl = lossEl;
    this.accEl = accEl;
    this.accCaption = accCaption;
    this.mode = "images";
    this.reference = null;
    this.loss = makeChart(lossEl, LOSS);
    this.accuracy = makeChart(accEl, ACCURACY);
  }

  // "images" | "text" (reference: the text's unigram entropy, drawn on the loss chart); the charts are made
  // anew (empty) when either changes.
  setMode(mode, reference = null) {
    if (mode === this.mode && reference === this.reference) return;
    this.mode = mode;
    this.reference = reference;
    this.loss.destroy();
    this.accuracy.destroy();
    const text = mode === "text";
    this.loss = makeChart(this.lossEl, { ...LOSS, reference: text ? reference : null });
    this.accuracy = makeChart(this.accEl, text ? VAL_LOSS : ACCURACY);
    this.accCaption.textContent = text ? "Validation loss at each sample" : "Test accuracy per epoch";
    this.accEl.setAttribute("aria-label", text ? "Chart of the validation loss at each sample" :
      "Chart of the test accuracy per epoch");
    const line = text && reference != null ? `, with the text's unigram entropy (${reference.toFixed(2)}) dashed` : "";
    this.lossEl.setAttribute("aria-label", `Chart of the training loss per step${line}`);
  }

  reset() {
    this.loss.clear();
    this.accuracy.clear();
  }
}
