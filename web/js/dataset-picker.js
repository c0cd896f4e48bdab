// The dataset picker: MNIST (downloaded with the page), CIFAR-10 or CIFAR-100 from files the user chooses or
// drops (the binary tarball, or its extracted files), the user's own images (a folder of one subfolder per class,
// resized to the chosen size), or a text for a language model (a .txt file chosen or dropped, or the bundled
// Shakespeare sample). Files go to the worker as File objects or bytes (nothing is uploaded anywhere); the
// trainer answers "data" (the dataset in use) or "data-error" (why not; the current data stays).
// body[data-dataset] is the dataset in use.

const $ = (id) => document.getElementById(id);

export const MAX_TEXT_BYTES = 16 * 2 ** 20; // the trainer's limit too (webgrad/apps/mnist/data.py)
const LABELS = { mnist: "MNIST", cifar10: "CIFAR-10", cifar100: "CIFAR-100", images: "your images", text: "the text" };
const HINTS = {
  cifar10: "Choose or drop your CIFAR-10 files.", cifar100: "Choose or drop your CIFAR-100 files.",
  images: "Choose a folder with one subfolder of images per class.",
  text: "Choose or drop a .txt file, or use the Shakespeare sample.",
};

export class DatasetPicker {
  constructor(client) {
    this.client = client;
    this.current = "mnist";
    this.choice = "mnist";
    this.busy = false;
    for (const radio of this.radios()) radio.addEventListener("change", () => this.choose(radio.value));
    // The input is emptied once its files are sent, so that choosing the same (mended) files again counts.
    for (const [id, source] of [["cifar-files", null], ["image-folder", "images"], ["text-file", "text"]]) {
      $(id).addEventListener("change", (e) => {
        this.sendFiles(source || this.choice, e.target.files);
        e.target.value = "";
      });
    }
    for (const [id, source] of [["cifar-pick", null], ["text-pick", "text"]]) {
      const drop = $(id);
      drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
      drop.addEventListener("dragleave", () => drop.classList.remove("over"));
      drop.addEventListener("drop", (e) => {
        e.preventDefault();
        drop.classList.remove("over");
        this.sendFiles(source || this.choice, e.dataTransfer.files);
      });
    }
    $("text-sample").addEventListener("click", () => {
      this.status("Loading the Shakespeare sample…");
      this.busy = true;
      this.client.send({ type: "dataset", source: "text-sample" });
    });
    client.on("app:data", (m) => this.loaded(m));
    client.on("app:data-error", ({ message }) => this.failed(message));
    client.on("app:data-progress", ({ text }) => this.status(text));
  }

  radios() {
    return document.querySelectorAll('input[name="dataset"]');
  }

  // Show the chooser of `value`'s files (the CIFAR one says which CIFAR).
  showPicker(value) {
    const cifar = value === "cifar10" || value === "cifar100";
    $("cifar-pick").hidden = !cifar;
    if (cifar) {
      $("cifar-button").textContent = `Choose ${LABELS[value]} files…`;
      $("cifar-hint-cifar10").hidden = value !== "cifar10";
      $("cifar-hint-cifar100").hidden = value !== "cifar100";
    }
    $("images-pick").hidden = value !== "images";
    $("text-pick").hidden = value !== "text";
  }

  choose(value) {
    this.choice = value;
    this.showPicker(value);
    if (value === "mnist" && this.current !== "mnist") {
      this.status("Loading MNIST…");
      this.busy = true;
      this.client.send({ type: "dataset", source: "mnist" });
    } else if (value !== this.current) {
      this.status(HINTS[value]);
    }
  }

  async sendFiles(source, fileList) {
    const files = [...fileList];
    if (!files.length) return;
    if (source === "text") return this.sendText(files[0]);
    const size = Number($("image-size").value);
    if (source === "images" && !(Number.isInteger(size) && size >= 8 && size <= 2048)) {
      this.status("Image size: a whole number of pixels from 8 to 2048.", "error");
      return;
    }
    this.status(`Reading ${files.length} file${files.length === 1 ? "" : "s"}…`);
    this.busy = true;
    this.client.worker.postMessage({ type: "dataset-files", source, files, size });
  }

  // A text goes to the trainer as its bytes (it decodes them and says what is wrong); a huge one is refused
  // here, before it is read.
  async sendText(file) {
    if (file.size > MAX_TEXT_BYTES) {
      const n = new Intl.NumberFormat("en-US");
      this.failed(`${file.name} holds ${n.format(file.size)} bytes, more than the ${MAX_TEXT_BYTES / 2 ** 20} MiB ` +
        `(${n.format(MAX_TEXT_BYTES)} bytes) the page takes; a long book is about 1 MiB`);
      return;
    }
    this.status(`Reading ${file.name}…`);
    this.busy = true;
    const data = new Uint8Array(await file.arrayBuffer());
    this.client.send({ type: "dataset", source: "text", data, name: file.name }, [data.buffer]);
  }

  loaded(m) {
    this.busy = false;
    this.current = m.name;
    document.body.dataset.dataset = m.name;
    for (const radio of this.radios()) radio.checked = radio.value === m.name;
    this.choice = m.name;
    this.showPicker(m.name);
    const n = new Intl.NumberFormat("en-US");
    if (m.name === "text") {
      const tokens = m.tokens === "bytes" ? "bytes" : "characters";
      this.status(`${m.label}: ${n.format(m.characters)} characters, ${n.format(m.vocab_size)} distinct ${tokens} ` +
        `(the tokens); ${n.format(m.train_size)} tokens for training and ${n.format(m.test_size)} held out, on the ` +
        `GPU. Unigram entropy ${m.unigram.toFixed(3)} nats per token.${m.notes ? ` ${m.notes}.` : ""}`, "ok");
      return;
    }
    const shape = `${m.channels}×${m.height}×${m.width}`;
    const classes = m.classes.length <= 12 ? `: ${m.classes.join(", ")}` : "";
    this.status(`${m.label}: ${n.format(m.train_size)} training and ${n.format(m.test_size)} test images ` +
      `(${shape}) on the GPU, ${m.classes.length} classes${classes}.${m.notes ? ` ${m.notes}.` : ""}`,
      m.name === "mnist" ? "" : "ok");
  }

  failed(message) {
    this.busy = false;
    this.status(`Not loaded, the current data (${this.label()}) stays: ${message}`, "error");
  }

  label() {
    return LABELS[this.current] || this.current;
  }

  status(text, kind = "") {
    $("data-status").textContent = text;
    $("data-status").className = kind || "muted";
  }

  setEnabled(enabled) {
    $("dataset-fields").disabled = !enabled;
    for (const id of ["cifar-files", "image-folder", "image-size", "text-file", "text-sample"]) {
      $(id).disabled = !enabled;
    }
  }
}
