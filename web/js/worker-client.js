// The page's end of web/worker.js: starts the worker, routes its messages by type, and sends the
// trainer's messages. Also defines what tests and the console use:
//   window.webgradRunPython(code) -> Promise of the result of runPythonAsync(code) in the worker
//   window.webgradReady           -> Promise that settles when Python and webgrad are up

export class WorkerClient {
  constructor() {
    this.worker = new Worker(new URL("../worker.js", import.meta.url), { type: "module" });
    this.handlers = new Map();
    this.pending = new Map();
    this.nextId = 0;
    this.worker.onmessage = ({ data }) => this.dispatch(data);
    this.worker.onerror = (e) => this.dispatch({ type: "error", text: e.message || "could not load worker.js" });

    window.webgradRunPython = (code) => this.runPython(code);
    window.webgradReady = new Promise((resolve, reject) => {
      this.on("ready", resolve);
      this.on("error", ({ text }) => reject(new Error(text)));
    });
    window.webgradReady.catch(() => {}); // shown on the page; don't also report it as unhandled
  }

  // on(type, fn): call fn(message) for every worker message of that type (the trainer's: "app:<type>").
  on(type, fn) {
    if (!this.handlers.has(type)) this.handlers.set(type, []);
    this.handlers.get(type).push(fn);
  }

  dispatch(data) {
    if (data.type === "result") {
      const p = this.pending.get(data.id);
      this.pending.delete(data.id);
      data.ok ? p.resolve(data.value) : p.reject(new Error(data.error));
      return;
    }
    const type = data.type === "app" ? `app:${data.msg.type}` : data.type;
    const msg = data.type === "app" ? data.msg : data;
    for (const fn of this.handlers.get(type) || []) fn(msg);
  }

  // A message for the trainer (webgrad.apps.mnist, package/webgrad/apps/mnist/app.py). `transfer`: ArrayBuffers to move, not copy.
  send(msg, transfer = []) {
    this.worker.postMessage({ type: "app", msg }, transfer);
  }

  runPython(code) {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: "run", id, code });
    });
  }
}
