// Runs webgrad's training benchmark inside Pyodide under Node, with Dawn (npm `webgpu`) as navigator.gpu:
// the browser path (Pyodide, the JS FFI, Chrome's WebGPU implementation) without a browser.
// Started by tools/bench_dawn.py, which passes one JSON argument:
//   {pyodide: dir, webgpu: dir, wheel: path, dawn_flags: [...], python: source}
// and reads back the lines the Python source prints (results are lines starting "RESULT ").
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const { loadPyodide } = await import(pathToFileURL(path.join(config.pyodide, "pyodide.mjs")).href);

let t0 = performance.now();
const pyodide = await loadPyodide({
  indexURL: config.pyodide + path.sep,
  stdout: (line) => console.log(line),
  stderr: (line) => console.error(line),
});
const bootSeconds = (performance.now() - t0) / 1000;

// Dawn's globals (GPUBufferUsage, ...) and navigator.gpu. Set only after loadPyodide: Pyodide probes the
// environment while it boots. Node has a `navigator` global whose properties are getters: define, not assign.
const { create, globals } = await import(pathToFileURL(path.join(config.webgpu, "index.js")).href);
Object.assign(globalThis, globals);
function useDawn(flags) {
  Object.defineProperty(globalThis.navigator, "gpu", { value: create(flags), configurable: true });
}
useDawn(config.dawn_flags);
// A new Dawn instance with other toggles as navigator.gpu, for Python to compare configurations in one run
// (bench_dawn.py --profile --also; Python then lets go of its device: webgrad.webgpu.reset()).
globalThis.webgradUseDawn = (flags) => useDawn(Array.from(flags));

// unpackArchive refuses a Node Buffer: hand it a plain Uint8Array.
pyodide.unpackArchive(new Uint8Array(fs.readFileSync(config.wheel)), "wheel");
console.log(`BOOT ${bootSeconds.toFixed(2)}`);

try {
  await pyodide.runPythonAsync(config.python);  // runPythonAsync: JSPI lets Python block on promises
} catch (err) {
  console.error(String(err));
  process.exit(1);
}
// Dawn keeps the event loop alive: leave explicitly once the run is done.
process.exit(0);
