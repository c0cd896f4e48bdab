// Checkpoints on the page: the offer to resume a run an earlier visit left (the #checkpoint banner), the
// "Checkpoint saved" line of the Progress card, and a resumed run's figures and curves put back.
// The trainer saves every epoch and on Pause (webgrad/apps/mnist/resume.py); the worker's store keeps the
// files (js/checkpoint-store.js).
//
// State for styling and tests on <body>: data-checkpoint (none|offered|error|saved|resumed: the latest
// news), data-checkpoint-step (global step of the last checkpoint saved or resumed).

import { formatBytes } from "./run-view.js";

const $ = (id) => document.getElementById(id);

// "today at 14:03:12", "yesterday at ...", else the date and time in the user's locale.
export function formatWhen(seconds) {
  const when = new Date(seconds * 1000), now = new Date();
  const time = when.toLocaleTimeString();
  const days = Math.round((new Date(now.toDateString()) - new Date(when.toDateString())) / 86_400_000);
  if (days === 0) return `today at ${time}`;
  if (days === 1) return `yesterday at ${time}`;
  return when.toLocaleString();
}

// "epoch 2 of 3, step 57 of 187"; a GPT's run (one pass of steps): "step 200 of 500"
function position(s) {
  if (s.config?.dataset === "text") return `step ${s.step} of ${s.total_steps}`;
  return `epoch ${s.epoch} of ${s.epochs}, step ${s.step_in_epoch} of ${s.steps_per_epoch}`;
}

const REASONS = { pause: "on Pause", epoch: "at the end of an epoch", sample: "with a sample" };
const AUGMENT = [["crop_padding", "RandomCrop padding"], ["flip_p", "flip p"], ["brightness", "brightness"],
  ["contrast", "contrast"], ["erasing_p", "RandomErasing p"]];

// "Adam, lr 0.002, batch 16, cosine annealing; augmentation: RandomCrop padding 4, flip p 0.5": a run's settings,
// in the words of the form's options
export function describeSettings(form, config) {
  const label = (name) => {
    const option = [...(form.field(name)?.options || [])].find((o) => o.value === String(config[name]));
    return option ? option.textContent.trim() : String(config[name]);
  };
  const parts = [];
  if (config.optimizer) parts.push(label("optimizer"));
  if (config.lr != null) parts.push(`lr ${config.lr}`);
  if (config.batch_size != null) parts.push(`batch ${config.batch_size}`);
  if (config.scheduler && config.scheduler !== "none") parts.push(label("scheduler"));
  if (config.dataset === "text") {
    parts.push(`${config.steps} steps`, `a sample every ${config.sample_every}`);
  }
  if (config.amp) parts.push("mixed precision");
  let text = parts.join(", ");
  if (config.dataset !== "text" && AUGMENT.some(([key]) => key in config)) {
    const on = AUGMENT.filter(([key]) => config[key]).map(([key, name]) => `${name} ${config[key]}`);
    text += on.length ? `; augmentation: ${on.join(", ")}` : "; no augmentation";
  }
  return text;
}

// What the checkpoint trained on, and where it comes from: "page" (MNIST), "sample" (the bundled text) or
// "files" (the user's, which must be chosen again after a reload). Checkpoints of before this field: by dataset.
function trainedOn(s) {
  const dataset = s.config?.dataset || "mnist";
  return { name: dataset, label: s.dataset, source: dataset === "mnist" ? "page" : "files", ...(s.data || {}) };
}

export class CheckpointView {
  // client: the WorkerClient; charts, run, form, textView: the page's views (a resumed run refills them).
  constructor({ client, charts, run, form, textView }) {
    this.client = client;
    this.textView = textView;
    this.charts = charts;
    this.run = run;
    this.form = form;
    this.banner = $("checkpoint");
    this.status = $("checkpoint-status");
    this.setNews("none");
    this.offered = null;

    $("checkpoint-resume").addEventListener("click", () => {
      this.busy(true);
      client.send({ type: "resume-checkpoint" });
    });
    $("checkpoint-discard").addEventListener("click", () => {
      this.busy(true);
      client.send({ type: "discard-checkpoint" });
    });

    client.on("app:checkpoint-offer", (m) => this.offer(m));
    client.on("app:data", (m) => this.dataNote(m));
    client.on("app:checkpoint-saved", (m) => this.saved(m));
    client.on("app:checkpoint-error", (m) => this.error(m));
    client.on("app:checkpoint-discarded", ({ why }) => {
      this.hide();
      this.setStatus(why === "done" ? "The run is complete, so its checkpoint was removed." :
        "The checkpoint was removed.");
      this.setNews("none");
    });
    // Registered after main.js's own handler: the run view and the charts have been reset for the run.
    client.on("app:state", (m) => {
      if (!m.config) return;
      this.hide();
      this.setStatus(""); // the last run's news
      if (m.resumed) this.resumed(m);
    });
  }

  setNews(news, step) {
    document.body.dataset.checkpoint = news;
    if (step !== undefined) document.body.dataset.checkpointStep = step;
  }

  setStatus(text, kind = "") {
    this.status.textContent = text;
    this.status.className = `muted small ${kind}`.trim();
  }

  busy(on) {
    $("checkpoint-resume").disabled = $("checkpoint-discard").disabled = on;
  }

  show(state, title, lead) {
    this.banner.dataset.state = state;
    $("checkpoint-title").textContent = title;
    $("checkpoint-lead").textContent = lead;
    this.busy(false);
    this.banner.hidden = false;
  }

  hide() {
    this.banner.hidden = true;
    this.offered = null;
  }

  offer({ summary: s, where, warning }) {
    const facts = [
      ["Model", s.model], ["Dataset", s.data?.name === "text" ? `${s.dataset} (${s.data.label})` : s.dataset],
      ["Progress", position(s)],
      ["Saved", `${formatWhen(s.saved_at)}, ${REASONS[s.reason] || s.reason}`],
    ];
    if (s.config) facts.splice(2, 0, ["Settings", describeSettings(this.form, s.config)]);
    if (s.loss != null) facts.push(["Loss", s.loss.toFixed(4)]);
    if (s.accuracy != null) facts.push(["Test accuracy", `${(100 * s.accuracy).toFixed(2)}%`]);
    if (s.val_loss != null) facts.push(["Validation loss", s.val_loss.toFixed(4)]);
    $("checkpoint-facts").replaceChildren(...facts.map(([term, value]) => {
      const div = document.createElement("div");
      const dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = term;
      dd.textContent = value;
      div.append(dt, dd);
      return div;
    }));
    $("checkpoint-problem").textContent = warning || "";
    this.offered = trainedOn(s);
    this.dataNote(null);
    $("checkpoint-note").textContent = `Kept in this browser (${where}). Train starts a new run instead, and ` +
      "replaces this checkpoint.";
    this.show("offer", "Resume training?", "A training run of an earlier visit was saved in this browser:");
    this.setNews("offered", s.step);
    $("checkpoint-resume").focus({ preventScroll: true });
  }

  // The line that says, before the click, whether the checkpoint's data must be chosen again; `m`: the data the
  // page holds now (its "data" message), or null when not known here.
  dataNote(m) {
    const note = $("checkpoint-data"), d = this.offered;
    if (!d || d.source === "page") {
      note.textContent = "";
      return;
    }
    const loaded = m && m.name === d.name && (d.name !== "text" || m.label === d.label);
    if (loaded) {
      note.textContent = `${d.label} is loaded: Resume continues the run.`;
      note.className = "ok";
    } else if (d.source === "sample") {
      note.textContent = `It trained on ${d.label}: Resume loads it again.`;
      note.className = "";
    } else {
      note.textContent = `It trained on ${d.label}, which this page does not keep: choose ${d.name === "text" ?
        "that text file" : "those files"} again under Data (above), then Resume.`;
      note.className = "needs-data";
    }
    note.dataset.loaded = loaded ? "true" : "false";
  }

  saved({ summary: s, where, bytes }) {
    const place = where ? `in ${where}` : "in memory only";
    this.setStatus(`Checkpoint saved ${place} ${REASONS[s.reason] || s.reason}: ${position(s)} ` +
      `(${new Date(s.saved_at * 1000).toLocaleTimeString()}, ${formatBytes(bytes)}).`);
    this.setNews("saved", s.step);
  }

  error({ message, context }) {
    if (context === "save") { // the run goes on; the line under the progress says what happened
      this.setStatus(message, "error");
      return;
    }
    $("checkpoint-problem").textContent = message;
    if (context === "resume" && !this.banner.hidden && this.banner.dataset.state === "offer") {
      this.busy(false); // the offer stands: the message says what to do first
    } else {
      $("checkpoint-facts").replaceChildren();
      $("checkpoint-note").textContent = "The page works as before: train a new model, or Discard to remove the " +
        "checkpoint.";
      this.show("error", "The saved checkpoint cannot be used", "");
    }
    this.setNews("error");
  }

  // A resumed run: the figures, the curves and the form as they were at the checkpoint.
  resumed(m) {
    const s = m.resumed;
    this.run.bar.value = s.step;
    this.run.set("epoch", `${s.epoch} / ${s.epochs}`);
    this.run.set("step", m.config.dataset === "text" ? `${s.step} / ${s.total_steps}` :
      `${s.step_in_epoch} / ${s.steps_per_epoch}`);
    if (s.loss != null) this.run.set("loss", s.loss.toFixed(4));
    if (s.accuracy != null) this.run.accuracy(s.accuracy, m.config.test_size);
    if (s.val_loss != null) this.run.set("accuracy", s.val_loss.toFixed(4));
    if (m.sample) this.textView.sample(m.sample); // a GPT's last sample of text
    for (const [x, y] of m.history.loss) this.charts.loss.add(x, y);
    for (const [x, y] of m.history.accuracy) this.charts.accuracy.add(x, 100 * y);
    for (const [x, y] of m.history.val_loss || []) this.charts.accuracy.add(x, y);
    for (const [name, value] of Object.entries(m.config)) {
      const field = this.form.field(name);
      if (!field || field.disabled) continue; // a field of the other kind of dataset
      if (field.type === "checkbox") field.checked = Boolean(value);
      else field.value = String(value);
    }
    this.run.setMessage(s.message, s.lost ? "error" : "ok");
    this.setNews("resumed", s.step);
  }
}
