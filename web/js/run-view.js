// The run's progress: a bar, epoch/step/samples-per-second (tokens for a GPT)/ETA/loss/accuracy (validation loss)
// figures, the message the run ended with, and while the first steps record the GPU step for replay (seconds
// on a software GPU, with no figure yet), a line that says so.

const $ = (root, sel) => root.querySelector(sel);

export function formatDuration(s) {
  if (s == null || !isFinite(s)) return "–";
  s = Math.round(s);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, "0")} min`;
}

const number = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function formatBytes(n) {
  if (n == null) return "–";
  if (n < 2 ** 20) return `${(n / 1024).toFixed(0)} KiB`;
  if (n < 2 ** 30) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${(n / 2 ** 30).toFixed(2)} GiB`;
}

export class RunView {
  constructor(root) {
    this.root = root;
    this.bar = $(root, "#train-progress");
    this.fields = Object.fromEntries(["epoch", "step", "rate", "eta", "loss", "accuracy", "lr", "memory", "gpu"].map(
      (k) => [k, $(root, `#stat-${k}`)]));
    this.message = $(root, "#run-message");
    this.preparing = $(root, "#run-preparing");
  }

  set(key, text) {
    this.fields[key].textContent = text;
  }

  // No model any more (another dataset's data came): the last run's figures go.
  clear() {
    this.bar.value = 0;
    for (const key of Object.keys(this.fields)) this.set(key, "–");
    this.setMessage("");
  }

  start(msg) {
    this.bar.max = msg.total_steps;
    this.bar.value = 0;
    for (const key of Object.keys(this.fields)) this.set(key, "–");
    this.set("epoch", `1 / ${msg.config.epochs}`);
    this.setMessage(`Training the ${msg.model} (${msg.total_steps} steps)…`);
    this.setPreparing(true);
  }

  setPreparing(on) {
    this.preparing.hidden = !on;
    document.body.dataset.preparing = on ? "true" : "false";
  }

  progress(msg) {
    this.bar.value = msg.global_step;
    this.set("epoch", `${msg.epoch} / ${msg.epochs}`);
    this.set("step", `${msg.step} / ${msg.steps}`);
    if (msg.tokens_per_s) this.set("rate", number.format(msg.tokens_per_s));
    else if (msg.samples_per_s) this.set("rate", number.format(msg.samples_per_s));
    if (msg.preparing === false && !this.preparing.hidden) this.setPreparing(false);
    this.set("eta", formatDuration(msg.eta_s));
    this.set("lr", msg.lr.toPrecision(3));
    if (msg.loss !== undefined) this.set("loss", msg.loss.toFixed(4));
    if (msg.memory !== undefined) {
      this.set("memory", formatBytes(msg.memory));
      this.fields.memory.title = `held by tensors now; at its peak ${formatBytes(msg.peak_memory)}`;
    }
    // GPU time per step from timestamp queries; where the adapter has none, say so
    if (msg.gpu_ms != null) {
      this.set("gpu", msg.gpu_ms.toFixed(msg.gpu_ms < 10 ? 2 : 1));
      this.fields.gpu.title = "GPU time per training step, from WebGPU timestamp queries";
    } else if (msg.gpu_timer) {
      this.set("gpu", "n/a");
      this.fields.gpu.title = `GPU time per step: ${msg.gpu_timer}`;
    }
  }

  accuracy(acc, testSize) {
    this.set("accuracy", `${(acc * 100).toFixed(2)}%`);
    this.fields.accuracy.title = `on ${testSize} test images`;
  }

  valLoss(loss, unigram) {
    this.set("accuracy", loss.toFixed(4));
    this.fields.accuracy.title =
      `nats per token on the held-out end of the text (unigram entropy ${unigram.toFixed(3)})`;
  }

  // kind: "" (neutral), "ok", "error"
  setMessage(text, kind = "") {
    this.message.textContent = text;
    this.message.className = kind;
  }
}
