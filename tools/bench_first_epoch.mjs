// The dashboard's boot and first epoch without a browser: Pyodide under Node with Dawn (npm `webgpu`) as
// navigator.gpu, the steps web/worker.js takes (boot Pyodide, install the wheel and import
// webgrad.apps.mnist, put the MNIST IDX files into Pyodide's file system), then the Python source, which
// drives the App. Started by tools/bench_first_epoch.py, which passes one JSON argument:
//   {pyodide: dir, webgpu: dir, wheel: path, mnist: {IDX file name: path}, dawn_flags: [...], python: source}
// Each phase's end is printed as "MARK <name> <seconds since the process started>" (performance.now()
// counts from the process's start; the Python source marks its phases with the same clock).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const mark = (name) => console.log(`MARK ${name} ${(performance.now() / 1000).toFixed(3)}`);
mark("node");

const config = JSON.parse(process.argv[2]);
const { loadPyodide } = await import(pathToFileURL(path.join(config.pyodide, "pyodide.mjs")).href);
const pyodide = await loadPyodide({
  indexURL: config.pyodide + path.sep,
  stdout: (line) => console.log(line),
  stderr: (line) => console.error(line),
});
mark("pyodide");

// Dawn's globals (GPUBufferUsage, ...) and navigator.gpu, set after loadPyodide as in bench_dawn.mjs (Pyodide
// probes the environment while it boots; Node's navigator has getters: define, not assign).
const { create, globals } = await import(pathToFileURL(path.join(config.webgpu, "index.js")).href);
Object.assign(globalThis, globals);
Object.defineProperty(globalThis.navigator, "gpu", { value: create(config.dawn_flags), configurable: true });
mark("dawn");

// unpackArchive refuses a Node Buffer: hand it a plain Uint8Array. Then the worker's imports.
pyodide.unpackArchive(new Uint8Array(fs.readFileSync(config.wheel)), "wheel");
pyodide.runPython("import webgrad, webgrad.apps.mnist");
mark("wheel");

// The worker downloads the four IDX files and writes them into this folder (web/worker.js DATA_DIR).
const DATA_DIR = "/home/pyodide/mnist";
pyodide.FS.mkdirTree(DATA_DIR);
for (const [name, file] of Object.entries(config.mnist)) {
  pyodide.FS.writeFile(`${DATA_DIR}/${name}`, new Uint8Array(fs.readFileSync(file)));
}
mark("mnist");

try {
  await pyodide.runPythonAsync(config.python);  // runPythonAsync: JSPI lets Python block on promises
} catch (err) {
  console.error(String(err));
  process.exit(1);
}
// Dawn keeps the event loop alive: leave explicitly once the run is done.
process.exit(0);
