// Module Web Worker: boots Pyodide, installs the webgrad wheel, loads MNIST and runs the trainer
// (webgrad.apps.mnist, shipped in the wheel) here, so training never blocks the page; the page only renders.
// URLs are relative to this file, so the site works from serve.py and from a static copy.
//
// Messages, worker -> page:
//   {type: "progress", stage, loaded, total, text}   boot progress; stage "pyodide" | "wheel" | "data"
//   {type: "status", text}                 what boot is doing
//   {type: "ready", python, webgrad}       Python and webgrad are up (webgradRunPython works)
//   {type: "error", text}                  boot failed
//   {type: "app-ready"} | {type: "app-error", text}   the trainer has (not) got its data on the GPU
//   {type: "app", msg}                     a message of the trainer (see package/webgrad/apps/mnist/app.py)
//   {type: "gpu-lost", reason, message}    WebGPU lost the device
//   {type: "stdout" | "stderr", text}      Python output
//   {type: "result", id, ok, value | error}   answer to a "run"
// page -> worker:
//   {type: "run", id, code}                run `code` with runPythonAsync (tests, the console)
//   {type: "app", msg}                     a message for the trainer
//   {type: "dataset-files", source: "cifar10" | "cifar100", files} | {type: "dataset-files", source: "images", files, size}
//                                          the user's files (see "Datasets from the user's files" below)

import { openCheckpointStore } from "./js/checkpoint-store.js";
import { countingFetch, readBody } from "./js/fetch-progress.js";
import { installGpuTimer } from "./js/gpu-timer.js";
import { decodeFolder } from "./js/image-folder.js";

const here = (path) => new URL(path, import.meta.url).href;
const post = (msg) => self.postMessage(msg);
const status = (text) => post({ type: "status", text });
const progress = (stage, loaded, total, text) => post({ type: "progress", stage, loaded, total, text });

const DATA_DIR = "/home/pyodide/mnist";
const DATA_FILES = {
  "train-images": "train-images-idx3-ubyte", "train-labels": "train-labels-idx1-ubyte",
  "t10k-images": "t10k-images-idx3-ubyte", "t10k-labels": "t10k-labels-idx1-ubyte",
};

let app = null; // the Python App (a PyProxy) once the data is on the GPU
let fromJs = null; // webgrad.apps.mnist.from_js: page message -> Python dict

// The GPU device is made by webgrad's browser binding, in Python. Observing requestDevice lets the
// page hear of a lost device (GPU reset, driver update) without reaching into the binding.
// self.webgradDevices also lets tests destroy the device to simulate a loss.
self.webgradDevices = [];
if (self.GPUAdapter) {
  const requestDevice = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    // Timestamp queries (GPU ms per step) and 16-bit floats (mixed precision) where the adapter has them.
    const wanted = ["timestamp-query", "shader-f16"].filter((f) => this.features.has(f));
    const descriptor = { ...(args[0] || {}) };
    descriptor.requiredFeatures = [...new Set([...(descriptor.requiredFeatures || []), ...wanted])];
    args[0] = descriptor;
    self.webgradAdapterFeatures = [...this.features];
    const device = await requestDevice.apply(this, args);
    installGpuTimer(device);
    self.webgradDevices.push(device);
    device.lost.then((info) => {
      post({ type: "gpu-lost", reason: info.reason, message: info.message });
      if (app) app.device_lost(`${info.reason || "unknown"}: ${info.message || "no message"}`);
    });
    return device;
  };
}

// Checkpoints: the trainer keeps them in this origin's private file system (OPFS), or IndexedDB, through this
// store (webgrad/apps/mnist/storage.py calls it); see js/checkpoint-store.js.
self.webgradCheckpoints = openCheckpointStore();

// MNIST, fetched from the start (in parallel with Pyodide's boot). The server sends it gzipped, so the
// Content-Length is not what the stream yields: each IDX file's header says how big it will be.
function idxSize(head) {
  if (head.length < 4) return 0;
  const ndim = head[3], end = 4 + 4 * ndim;
  if (head.length < end) return 0;
  const view = new DataView(head.buffer, head.byteOffset, end);
  let count = 1;
  for (let i = 0; i < ndim; i++) count *= view.getUint32(4 + 4 * i); // big-endian dimensions
  return end + count;
}

function fetchData() {
  const loaded = {}, total = {};
  const keys = Object.keys(DATA_FILES);
  const report = () => {
    const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
    const known = keys.every((k) => total[k]);
    progress("data", sum(loaded), known ? sum(total) : 0, "MNIST");
  };
  return Promise.all(keys.map(async (key) => {
    const file = DATA_FILES[key];
    const response = await fetch(here(`./data/${file}`));
    if (!response.ok) throw new Error(`data/${file}: HTTP ${response.status}`);
    loaded[key] = 0;
    const bytes = await readBody(response, (chunk, soFar) => {
      loaded[key] += chunk.length;
      if (!total[key]) total[key] = idxSize(soFar);
      report();
    });
    total[key] = loaded[key] = bytes.length;
    report();
    return [key, bytes];
  })).then(Object.fromEntries);
}

async function bootPython() {
  status("loading Pyodide");
  // Pyodide fetches its wasm and standard library itself: count those bytes for the progress bar.
  // (Pyodide may keep the fetch it was loaded with, so the counter goes quiet once it has loaded.)
  const files = {};
  let loaded = false;
  const counting = countingFetch((url, bytes, total) => {
    if (loaded) return;
    files[url] = { bytes, total };
    const all = Object.values(files);
    const sum = (k) => all.reduce((a, f) => a + f[k], 0);
    progress("pyodide", sum("bytes"), all.every((f) => f.total) ? sum("total") : 0, "Pyodide");
  });
  const plainFetch = self.fetch;
  self.fetch = counting;
  let pyodide;
  try {
    const { loadPyodide } = await import(here("./pyodide/pyodide.mjs"));
    pyodide = await loadPyodide({
      indexURL: here("./pyodide/"),
      stdout: (text) => post({ type: "stdout", text }),
      stderr: (text) => post({ type: "stderr", text }),
    });
  } finally {
    self.fetch = plainFetch;
    loaded = true;
  }
  progress("pyodide", 1, 1, "Pyodide");

  status("fetching dist/wheel.json");
  progress("wheel", 0, 0, "webgrad");
  const resp = await fetch(here("./dist/wheel.json"), { cache: "no-cache" });
  if (!resp.ok) throw new Error(`dist/wheel.json: HTTP ${resp.status} (was the wheel built? run serve.py)`);
  const { wheel } = await resp.json();
  status(`installing ${wheel}`);
  // A pure-Python wheel loads straight from its URL; it has no dependencies to resolve.
  await pyodide.loadPackage(here(`./dist/${wheel}`), {
    errorCallback: (text) => post({ type: "stderr", text }),
  });

  status("loading the trainer");
  // The trainer is part of the wheel just installed: webgrad.apps.mnist.
  const info = pyodide.runPython(
    "import sys, webgrad, webgrad.apps.mnist\n" +
    "(sys.version.split()[0], getattr(webgrad, '__version__', None))"
  );
  const [python, version] = info.toJs();
  info.destroy();
  progress("wheel", 1, 1, "webgrad");
  post({ type: "ready", python, webgrad: version });
  return pyodide;
}

async function startApp(pyodide, data) {
  status("uploading MNIST to the GPU");
  // webgrad.datasets.MNIST reads IDX files from a folder: put the downloaded ones in Pyodide's.
  pyodide.FS.mkdirTree(DATA_DIR);
  for (const [key, bytes] of Object.entries(data)) pyodide.FS.writeFile(`${DATA_DIR}/${DATA_FILES[key]}`, bytes);
  const mod = pyodide.pyimport("webgrad.apps.mnist");
  fromJs = mod.from_js;
  // `app` is a global of the Python session: tests and the console can look at it.
  const candidate = mod.start((msg) => post({ type: "app", msg }));
  pyodide.globals.set("app", candidate);
  // The first GPU tensor creates the device: this is where a missing WebGPU shows up.
  await pyodide.runPythonAsync(`await app.load_data("${DATA_DIR}")`);
  app = candidate;
  post({ type: "app-ready" });
  // The trainer's message loop, for the life of the worker.
  pyodide.runPythonAsync("await app.serve()").catch((err) => post({ type: "app-error", text: lastLine(err) }));
}

// A Python exception's message without its traceback.
function lastLine(err) {
  const text = String(err && err.message || err).trim();
  return text.split("\n").pop();
}

const pythonReady = bootPython();
pythonReady.catch((err) => post({ type: "error", text: String(err && err.message || err) }));
const dataReady = fetchData();
dataReady.catch(() => {}); // reported below, once Python is up

(async () => {
  const pyodide = await pythonReady;
  let data;
  try {
    data = await dataReady;
  } catch (err) {
    post({ type: "app-error", text: `could not download MNIST: ${err.message || err}` });
    return;
  }
  try {
    await startApp(pyodide, data);
  } catch (err) {
    post({ type: "app-error", text: lastLine(err) });
  }
})().catch(() => {}); // boot errors were posted by bootPython

// Turn a Python result into something postMessage can clone.
function toPlain(pyodide, value) {
  if (value instanceof pyodide.ffi.PyProxy) {
    try {
      return value.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false });
    } catch {
      return value.toString(); // not convertible (e.g. a Tensor): its str()
    } finally {
      value.destroy();
    }
  }
  return value;
}

// ------------------------------------------------------------------ datasets from the user's files
// CIFAR-10 and CIFAR-100: the files go into Pyodide's file system as webgrad.datasets.CIFAR10 / CIFAR100 expect
// them (the tarball as downloaded, or the extracted binary files), then the trainer reads them. Your images:
// decoded here (js/image-folder.js) and handed over as one uint8 buffer. Problems found here go to the
// page as the trainer's "data-error" message (the current data stays); "data-progress" says what is under way.
let datasetCount = 0;
const dataError = (message) => post({ type: "app", msg: { type: "data-error", message } });
const dataProgress = (text) => post({ type: "app", msg: { type: "data-progress", text } });

async function writeCifar(pyodide, files, source) {
  const root = `/home/pyodide/cifar-${++datasetCount}`;
  const [tarball, folder] = source === "cifar100" ? ["cifar-100", "cifar-100-binary"] : ["cifar-10", "cifar-10-batches-bin"];
  pyodide.FS.mkdirTree(root);
  for (const file of files) {
    const bytes = new Uint8Array(await file.arrayBuffer());
    if (/\.(tar\.gz|tgz|tar)$/i.test(file.name)) {
      pyodide.FS.writeFile(`${root}/${tarball}-${/python/i.test(file.name) ? "python" : "binary"}.tar.gz`, bytes);
    } else {
      pyodide.FS.mkdirTree(`${root}/${folder}`);
      pyodide.FS.writeFile(`${root}/${folder}/${file.name}`, bytes);
    }
  }
  return root;
}

async function datasetFiles(data) {
  const pyodide = await pythonReady;
  const files = [...data.files];
  if (data.source === "cifar10" || data.source === "cifar100") {
    const label = data.source === "cifar100" ? "CIFAR-100" : "CIFAR-10";
    if (!files.length) return dataError(`${label}: no file chosen`);
    dataProgress(`Reading ${files.length} ${label} file${files.length === 1 ? "" : "s"}…`);
    const root = await writeCifar(pyodide, files, data.source);
    return sendToApp({ type: "dataset", source: data.source, root });
  }
  const limits = self.webgradDevices.at(-1)?.limits;
  const limit = limits && Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const folder = await decodeFolder(files, data.size, limit, (n, total) => dataProgress(`Decoding images: ${n} / ${total}…`));
  dataProgress(`Uploading ${folder.labels.length} images to the GPU…`);
  sendToApp({ type: "dataset", source: "images", size: data.size, ...folder });
}

function sendToApp(msg) {
  const py = fromJs(msg);
  app.receive(py);
  py.destroy();
}

self.onmessage = async ({ data }) => {
  if (data.type === "dataset-files") {
    if (!app) return dataError("the trainer is not ready yet");
    try {
      await datasetFiles(data);
    } catch (err) {
      dataError(String(err && err.message || err));
    }
    return;
  }
  if (data.type === "app") {
    if (!app) return; // the page enables its controls only after "app-ready"
    const msg = fromJs(data.msg);
    app.receive(msg);
    msg.destroy();
    return;
  }
  if (data.type !== "run") return;
  let pyodide;
  try {
    pyodide = await pythonReady;
  } catch (err) {
    post({ type: "result", id: data.id, ok: false, error: `boot failed: ${err.message || err}` });
    return;
  }
  try {
    const value = toPlain(pyodide, await pyodide.runPythonAsync(data.code));
    try {
      post({ type: "result", id: data.id, ok: true, value });
    } catch {
      post({ type: "result", id: data.id, ok: true, value: String(value) }); // not cloneable
    }
  } catch (err) {
    post({ type: "result", id: data.id, ok: false, error: String(err && err.message || err) });
  }
};
