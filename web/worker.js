// Module Web Worker: boots Pyodide, installs the webgrad wheel, runs Python for the page.
// Python runs here, not on the page, so long GPU/training work never freezes the UI.
// URLs are relative to this file, so the site works from serve.py and from a static copy.
//
// Messages, worker -> page:
//   {type: "status", text}             boot progress
//   {type: "ready", python, webgrad}   boot done (Python version, webgrad.__version__ or undefined)
//   {type: "error", text}              boot failed
//   {type: "stdout" | "stderr", text}  Python output
//   {type: "result", id, ok, value | error}   answer to a "run"
// page -> worker:
//   {type: "run", id, code}            run `code` with runPythonAsync (top-level await allowed)

const here = (path) => new URL(path, import.meta.url).href;
const post = (msg) => self.postMessage(msg);
const status = (text) => post({ type: "status", text });

async function boot() {
  status("loading Pyodide");
  const { loadPyodide } = await import(here("./pyodide/pyodide.mjs"));
  const pyodide = await loadPyodide({
    indexURL: here("./pyodide/"),
    stdout: (text) => post({ type: "stdout", text }),
    stderr: (text) => post({ type: "stderr", text }),
  });

  status("fetching dist/wheel.json");
  const resp = await fetch(here("./dist/wheel.json"), { cache: "no-cache" });
  if (!resp.ok) throw new Error(`dist/wheel.json: HTTP ${resp.status} (was the wheel built? run serve.py)`);
  const { wheel } = await resp.json();

  status(`installing ${wheel}`);
  // A pure-Python wheel loads straight from its URL; it has no dependencies to resolve.
  await pyodide.loadPackage(here(`./dist/${wheel}`), {
    errorCallback: (text) => post({ type: "stderr", text }),
  });

  status("import webgrad");
  const info = pyodide.runPython(
    "import sys, webgrad\n" +
    "(sys.version.split()[0], getattr(webgrad, '__version__', None))"
  );
  const [python, version] = info.toJs();
  info.destroy();
  post({ type: "ready", python, webgrad: version });
  return pyodide;
}

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

const ready = boot();
ready.catch((err) => post({ type: "error", text: String(err && err.message || err) }));

self.onmessage = async ({ data }) => {
  if (data.type !== "run") return;
  let pyodide;
  try {
    pyodide = await ready;
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
