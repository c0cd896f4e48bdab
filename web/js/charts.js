// Live charts with uPlot: training loss per step (one point per loss read-back) and test accuracy
// per epoch. Each chart follows its container's width. The point count is mirrored in
// data-points on the container (tests read it).

import uPlot from "../vendor/uplot/uPlot.esm.js";

const HEIGHT = 220;

function makeChart(el, { label, xLabel, color, points, yRange, xWhole, fmt }) {
  const data = [[], []];
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
    series: [
      { label: xLabel },
      { label, stroke: color, width: 2, fill: color + "18", points: { show: points, size: 6, fill: color },
        value: (u, v) => (v == null ? "–" : fmt(v)) },
    ],
  };
  const plot = new uPlot(opts, data, el);
  new ResizeObserver(() => plot.setSize({ width: Math.max(el.clientWidth, 200), height: HEIGHT })).observe(el);
  let queued = false;
  return {
    add(x, y) {
      data[0].push(x);
      data[1].push(y);
      el.dataset.points = data[0].length;
      if (!queued) { // redraw at most once per frame
        queued = true;
        requestAnimationFrame(() => { queued = false; plot.setData(data); });
      }
    },
    clear() {
      data[0].length = data[1].length = 0;
      el.dataset.points = 0;
      plot.setData(data);
    },
  };
}

export class Charts {
  constructor(lossEl, accEl) {
    this.loss = makeChart(lossEl, { label: "loss", xLabel: "step", color: "#2563eb", points: false,
      fmt: (v) => v.toFixed(v < 1 ? 2 : 1) });
    this.accuracy = makeChart(accEl, { label: "test accuracy", xLabel: "epoch", color: "#16a34a", points: true, xWhole: true,
      yRange: (u, min, max) => [Math.min(Math.floor((min ?? 90) / 10) * 10, 90), 100], fmt: (v) => `${v.toFixed(v % 1 ? 1 : 0)}%` });
  }

  reset() {
    this.loss.clear();
    this.accuracy.clear();
  }
}
