// The page: wires the worker's messages to the views and the controls to the worker. Python (Pyodide,
// webgrad, the trainer webgrad.apps.mnist) runs in web/worker.js; this thread only renders.
//
// State for styling and tests lives on <body>: data-boot (loading|ready|error: Python and webgrad),
// data-app (loading|ready|error: the trainer with MNIST on the GPU), data-train (idle|training|paused),
// data-model (none|mlp|cnn: the model that answers predictions), data-gpu (none: no WebGPU; lost: the
// device was lost and a new one is being opened; ok), data-outcome (how the last run ended), data-dataset (the
// dataset in use: mnist|cifar10|cifar100|images|text; text swaps the image cards and fields for a GPT's),
// data-preparing (true while the first steps record the GPU step), data-samples (samples of text shown).

import { BootView } from "./boot-view.js";
import { Charts } from "./charts.js";
import { CheckpointView } from "./checkpoint.js";
import { DatasetPicker } from "./dataset-picker.js";
import { showAdapter } from "./gpu-info.js";
import { mnistify } from "./mnistify.js";
import { download, fetchModel, watchImport } from "./model-files.js";
import { drawDigit, Results } from "./results.js";
import { RunView } from "./run-view.js";
import { Sketch } from "./sketch.js";
import { TextView } from "./text-view.js";
import { TrainForm } from "./train-form.js";
import { WorkerClient } from "./worker-client.js";

const $ = (id) => document.getElementById(id);
const body = document.body;

const client = new WorkerClient();
const boot = new BootView($("boot"));
const form = new TrainForm($("train-form"), $("form-error"));
form.setMode("images");
const run = new RunView($("run"));
const charts = new Charts($("loss-chart"), $("acc-chart"), $("acc-caption"));
const textView = new TextView(client);
const results = new Results($("grid"), $("confusion"), $("per-class"), (i) => {
  if (body.dataset.dataset === "mnist") sketch.showDigit(results.digit(i));
});
const picker = new DatasetPicker(client);
const gpuOk = showAdapter($("gpu"));

const log = (text) => {
  const el = $("log");
  el.textContent += text + "\n";
  el.scrollTop = el.scrollHeight;
};
const setStatus = (text) => { $("status").textContent = text; };

// ------------------------------------------------------------------ boot

client.on("status", ({ text }) => setStatus(`Python: ${text}…`));
client.on("progress", (m) => boot.progress(m));
let versions = "";
client.on("ready", ({ python, webgrad }) => {
  body.dataset.boot = "ready";
  versions = `Python ${python}, webgrad ${webgrad ?? "?"}`;
  setStatus(`${versions} ready`);
});
client.on("error", ({ text }) => {
  body.dataset.boot = "error";
  setStatus(`Python failed to start: ${text}`);
});
client.on("app-ready", () => {
  body.dataset.app = "ready";
  setStatus(`${versions} ready; MNIST is on the GPU`);
  boot.done("Python, webgrad and MNIST are ready");
  setState("idle");
});
client.on("app-error", async ({ text }) => {
  body.dataset.app = "error";
  const hasGpu = await gpuOk;
  run.setMessage(hasGpu ? `The trainer could not start: ${text}` :
    "Training needs WebGPU, which this browser does not offer (see above).", "error");
  boot.done(hasGpu ? "Python is ready; the trainer is not" : "Python is ready; no WebGPU, so no training");
  setStatus(`${versions} ready; the trainer is not: ${text}`);
  setState("idle");
});
client.on("stdout", ({ text }) => log(text));
client.on("stderr", ({ text }) => log(text));
client.on("gpu-lost", ({ reason, message }) => {
  body.dataset.gpu = "lost";
  log(`GPU device lost: ${reason} ${message}`);
  run.setMessage(`The GPU device was lost (${reason}: ${message}). Opening a new one…`, "error");
  setState(body.dataset.train);
});

// ------------------------------------------------------------------ training

function setState(state) {
  body.dataset.train = state;
  const ready = body.dataset.app === "ready" && body.dataset.gpu !== "lost";
  const focused = document.activeElement;
  $("train").disabled = !ready || state !== "idle";
  $("pause").disabled = state !== "training";
  $("resume").disabled = state !== "paused";
  $("stop").disabled = state === "idle";
  form.setEnabled(state === "idle");
  picker.setEnabled(ready && state === "idle");
  // A button that just got disabled drops the keyboard focus: hand it to the one that undoes it.
  if (focused?.disabled) {
    const next = { pause: "resume", resume: "pause", stop: "train", train: "pause" }[focused.id];
    if (next && !$(next).disabled) $(next).focus();
  }
}

$("train-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const config = form.read();
  if (!config) return;
  client.send({ type: "train", config });
  $("train").disabled = true; // until the worker confirms (app:state)
});
$("pause").addEventListener("click", () => client.send({ type: "pause" }));
$("resume").addEventListener("click", () => client.send({ type: "resume" }));
$("stop").addEventListener("click", () => client.send({ type: "stop" }));

// ------------------------------------------------------------------ datasets (web/js/dataset-picker.js)
// Images and a text take different models and settings: the model picker's options, the fields shown, and the
// shared settings (optimizer, learning rate, batch size, schedule) each kind had last.
const IMAGE_MODELS = [...form.field("model").options].map((o) => [o.value, o.textContent]);
const SHARED = ["optimizer", "lr", "batch_size", "scheduler"];
const kept = { text: { optimizer: "adamw", lr: "0.003", batch_size: "16", scheduler: "none" } };
// What the Model file card says of the files, for images and for a GPT.
const code = (text) => Object.assign(document.createElement("code"), { textContent: text });
const FILE_NOTES = {
  images: [...$("file-status").childNodes],
  text: ["A GPT's weights, with nanoGPT's names and its config and vocabulary in the metadata: ",
    code("webgrad.models.gpt.define(torch.nn).GPT(config)"), " takes them in PyTorch."],
};
let mode = "images";

function setMode(next, m) {
  if (next !== mode) {
    kept[mode] = Object.fromEntries(SHARED.map((name) => [name, form.field(name).value]));
    for (const [name, value] of Object.entries(kept[next] || {})) form.field(name).value = value;
    mode = next;
  }
  form.setMode(mode);
  charts.setMode(mode, mode === "text" ? m.unigram : null);
  const select = form.field("model"), value = select.value;
  const options = mode === "text" ? m.models : IMAGE_MODELS;
  select.replaceChildren(...options.map(([v, label, detail]) => {
    const option = new Option(label, v);
    if (detail) option.dataset.detail = detail;
    return option;
  }));
  if (options.some(([v]) => v === value)) select.value = value;
  showModelNote();
  const files = $("file-status");
  if (files.className === "muted") { // the card's note, not news of a file
    files.replaceChildren(...FILE_NOTES[mode]);
    files.className = "muted";
  }
}

// A GPT's shape under the model picker (its option says its size only).
function showModelNote() {
  const option = form.field("model").selectedOptions[0];
  $("model-note").textContent = option?.dataset.detail || "";
}
form.field("model").addEventListener("change", showModelNote);

client.on("app:data", (m) => {
  setMode(m.name === "text" ? "text" : "images", m);
  if (m.model === "none" && body.dataset.model !== "none") { // the model did not fit the new data: its run is gone
    run.clear();
    charts.reset();
    textView.reset();
  }
  if (m.name === "text") {
    if (m.model === "none" && body.dataset.model !== "none") setModel("none");
    return;
  }
  results.setData(m);
  // The form's subsets: as many as the dataset has (its real size), at most the form's bounds.
  for (const [name, size, limit] of [["train_size", m.train_size, 60000], ["test_size", m.test_size, 10000]]) {
    const el = form.field(name);
    el.max = Math.max(1, Math.min(limit, size));
    el.value = el.max;
  }
  // The MLP's layer sizes follow the dataset's image size and class count.
  const mlp = form.field("model").querySelector('option[value="mlp"]');
  mlp.textContent = `MLP ${m.channels * m.height * m.width}-128-${m.classes.length}`;
  if (m.model === "none" && body.dataset.model !== "none") setModel("none");
  if (m.name !== "mnist" && form.field("model").value === "mlp") form.field("model").value = "resnet8";
});

// Mixed precision: offered where the adapter has shader-f16 and this webgrad has autocast + GradScaler.
async function offerMixedPrecision() {
  const box = form.field("amp"), why = $("amp-why");
  let reason = null;
  const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
  if (!adapter) reason = "not available: no WebGPU adapter";
  else if (!adapter.features.has("shader-f16")) {
    reason = "not available: this GPU adapter has no shader-f16 (16-bit floats in shaders)";
  } else {
    await window.webgradReady;
    const ok = await window.webgradRunPython(
      "import importlib.util, webgrad\nhasattr(webgrad, 'autocast') and importlib.util.find_spec('webgrad.amp') is not None");
    if (!ok) reason = "not available: this build of webgrad has no webgrad.autocast / webgrad.amp yet";
  }
  box.disabled = reason !== null;
  if (reason) box.checked = false;
  why.textContent = reason || "float16 forward pass (webgrad.autocast) with loss scaling (webgrad.amp.GradScaler)";
  box.closest("label").title = why.textContent;
}
offerMixedPrecision().catch((err) => { $("amp-why").textContent = `not available: ${err.message || err}`; });
client.on("app:state", (m) => {
  if (m.state === "training" && m.config) { // a new run
    delete body.dataset.outcome;
    run.start(m);
    charts.reset();
    if (m.config.dataset === "text") textView.reset();
    setModel(m.config.model);
  }
  if (m.state === "paused") run.setMessage("Paused: Resume continues from this step, Stop ends the run.");
  if (m.state === "training" && !m.config) run.setMessage("Training…");
  setState(m.state);
});
client.on("app:progress", (m) => {
  run.progress(m);
  if (m.loss !== undefined) charts.loss.add(m.global_step, m.loss);
});
client.on("app:eval", (m) => {
  results.showPredictions(m.grid_pred);
  results.showConfusion(m.confusion);
  run.accuracy(m.accuracy, m.test_size);
  if (m.source === "train") charts.accuracy.add(m.epoch, 100 * m.accuracy);
  if (m.source === "import") {
    fileStatus(`${importedLabel}: ${(100 * m.accuracy).toFixed(2)}% on ${m.test_size} test images.`, "ok");
  }
  classifyNow(); // the drawing's probabilities under the updated model
});
client.on("app:text-eval", (m) => {
  run.valLoss(m.val_loss, m.unigram);
  if (m.source === "train") charts.accuracy.add(m.step, m.val_loss);
  if (m.source === "import") {
    fileStatus(`${importedLabel}: validation loss ${m.val_loss.toFixed(3)} nats per token (the text's unigram ` +
      `entropy is ${m.unigram.toFixed(3)}).`, "ok");
  }
});
client.on("app:run-end", (m) => {
  run.setPreparing(false);
  setState("idle");
  if (m.outcome === "invalid") form.showError(m.message);
  const kind = { done: "ok", stopped: "", invalid: "error", diverged: "error", "device-lost": "error" }[m.outcome];
  const what = { done: "Done", stopped: "Stopped", invalid: "Not started", diverged: "Stopped: diverged",
    "device-lost": "Stopped: GPU lost" }[m.outcome];
  run.setMessage(`${what}: ${m.message}`, kind);
  body.dataset.outcome = m.outcome;
});
client.on("app:recovered", ({ message, model }) => {
  body.dataset.gpu = "ok";
  run.setMessage(message, "error");
  setModel(model || "none");
  setState(body.dataset.train);
});
client.on("app:error", ({ message, trace }) => {
  run.setMessage(`Error: ${message}`, "error");
  if (trace) log(trace);
});

// ------------------------------------------------------------------ draw a digit

const probsEl = $("probs");
probsEl.replaceChildren(...Array.from({ length: 10 }, (_, d) => {
  const li = document.createElement("li");
  li.innerHTML = `<span class="digit">${d}</span><span class="bar"><span></span></span><span class="pct">–</span>`;
  return li;
}));

function setModel(kind) {
  body.dataset.model = kind;
  $("export").disabled = kind === "none";
  classifyNow();
}

let inFlight = false, dirty = false, requestId = 0;
const sketch = new Sketch($("sketch"), classifySoon);

// While the user draws, at most one request is in flight; the newest drawing is sent when it answers.
function classifySoon() {
  if (inFlight) dirty = true;
  else classifyNow();
}

function classifyNow() {
  dirty = false;
  const pixels = mnistify(sketch.ink(), sketch.canvas.width, sketch.canvas.height);
  drawDigit($("sketch-28"), pixels || new Uint8Array(784));
  if (!pixels || body.dataset.model === "none" || body.dataset.app !== "ready") {
    showProbs(null, pixels ? "Train a model or import one to see its guesses." : "Draw a digit.");
    return;
  }
  inFlight = true;
  client.send({ type: "predict", id: ++requestId, pixels });
}

client.on("app:probs", ({ probs, message }) => {
  inFlight = false;
  probsEl.dataset.answers = Number(probsEl.dataset.answers || 0) + 1; // tests wait on this
  showProbs(probs, message);
  if (dirty) classifyNow();
});

function showProbs(probs, message) {
  const best = probs ? probs.indexOf(Math.max(...probs)) : -1;
  [...probsEl.children].forEach((li, d) => {
    const p = probs ? probs[d] : 0;
    li.querySelector(".bar span").style.width = `${100 * p}%`;
    li.querySelector(".pct").textContent = probs ? `${(100 * p).toFixed(1)}%` : "–";
    li.classList.toggle("best", d === best);
    li.dataset.p = p;
    li.setAttribute("aria-label", `${d}: ${probs ? (100 * p).toFixed(1) + "%" : "no guess"}`);
  });
  $("guess").textContent = probs ? `The model reads a ${best} (${(100 * probs[best]).toFixed(1)}%).` : (message || "");
  probsEl.dataset.state = probs ? "ready" : "empty";
}

$("clear").addEventListener("click", () => sketch.clear());
let sample = -1;
$("sample").addEventListener("click", () => {
  if (!results.pixels) return;
  sample = (sample + 1) % results.labels.length;
  sketch.showDigit(results.digit(sample));
});

// ------------------------------------------------------------------ model files

const fileStatus = (text, kind = "") => {
  $("file-status").textContent = text;
  $("file-status").className = kind;
};
$("export").addEventListener("click", () => client.send({ type: "export" }));
client.on("app:exported", ({ data, filename }) => {
  download(data, filename);
  fileStatus(`Exported ${filename} (${(data.length / 1024).toFixed(0)} KiB).`, "ok");
});
function importBytes(bytes, name) {
  fileStatus(`Importing ${name}…`);
  // The imported model is evaluated on as many test digits as the form asks for (when valid).
  const testSize = form.field("test_size");
  const test_size = testSize.validity.valid ? Number(testSize.value) : null;
  client.send({ type: "import", data: bytes, name, test_size }, [bytes.buffer]);
}
watchImport($("import"), importBytes);
// Load from URL: the page fetches the file, the worker imports it as a picked file (same checks, and the
// current model stays on any error).
$("url-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const url = $("model-url").value.trim();
  fileStatus(`Fetching ${url}…`);
  try {
    const { bytes, name } = await fetchModel(url);
    importBytes(bytes, name);
  } catch (err) {
    fileStatus(`Import failed, the current model is unchanged: ${err.message}`, "error");
  }
});
let importedLabel = "";
client.on("app:imported", ({ kind, model, name }) => {
  importedLabel = `Imported ${name}: ${model}`;
  fileStatus(`${importedLabel}. Evaluating it on the ${mode === "text" ? "held-out text" : "test images"}…`, "ok");
  if ([...form.field("model").options].some((o) => o.value === kind)) form.field("model").value = kind;
  setModel(kind);
});
client.on("app:import-error", ({ message }) => fileStatus(`Import failed, the current model is unchanged: ${message}`, "error"));

// Checkpoints: the Resume offer after a reload, the "saved" line, a resumed run's figures and curves. Made
// last: its handlers run after the ones above, on views they have already reset.
new CheckpointView({ client, charts, run, form, textView });

setState("idle");
