// The Text dataset's card: the sample the trainer generates on the GPU every `sample_every` steps, and the prompt
// box, whose continuation streams in as the GPU draws it (the trainer's "generate" and "generated" messages,
// package/webgrad/apps/mnist/app.py). body[data-samples] counts the samples shown (tests wait on it).

const $ = (id) => document.getElementById(id);

export class TextView {
  constructor(client) {
    this.client = client;
    this.requestId = 0;
    this.prompt = "";
    $("prompt-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.generate();
    });
    client.on("app:sample", (m) => this.sample(m));
    client.on("app:generated", (m) => this.generated(m));
  }

  // A new run: the last run's sample goes.
  reset() {
    $("sample-text").textContent = "";
    $("sample-meta").textContent = "Every few steps (Sample every) the model continues a new line, on the GPU.";
  }

  sample({ step, prompt, text, temperature, top_k: topK }) {
    const start = prompt === "\n" ? "a new line" : `“${prompt}”`;
    $("sample-meta").textContent = `Step ${step}: the model continues ${start} (temperature ${temperature}, ` +
      `top-k ${topK}; drawn on the GPU).`;
    $("sample-text").textContent = (prompt === "\n" ? "" : prompt) + text;
    document.body.dataset.samples = Number(document.body.dataset.samples || 0) + 1;
  }

  generate() {
    const form = $("prompt-form");
    if (!form.checkValidity()) {
      form.reportValidity();
      return;
    }
    this.prompt = $("prompt").value;
    this.status("Generating on the GPU…");
    $("generate").disabled = true;
    this.client.send({
      type: "generate", id: ++this.requestId, prompt: this.prompt,
      length: Number($("gen-length").value), temperature: Number($("gen-temperature").value),
    });
  }

  generated({ id, text, done, error }) {
    if (id !== this.requestId) return; // an answer to an older request
    if (error) {
      this.status(error, "error");
      $("generate").disabled = false;
      return;
    }
    const out = $("generated");
    const echo = document.createElement("span");
    echo.className = "prompt-echo";
    echo.textContent = this.prompt;
    out.replaceChildren(echo, document.createTextNode(text));
    if (done) {
      this.status(`${text.length} characters generated after your prompt.`);
      $("generate").disabled = false;
      out.dataset.done = "true";
    } else {
      delete out.dataset.done;
    }
  }

  status(text, kind = "") {
    $("generate-status").textContent = text;
    $("generate-status").className = `muted small ${kind}`.trim();
  }
}
