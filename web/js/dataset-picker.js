// The dataset picker: MNIST (downloaded with the page), CIFAR-10 from files the user chooses or drops (the
// binary tarball, or its extracted cifar-10-batches-bin files), or the user's own images (a folder of one
// subfolder per class, resized to the chosen size). Files go to the worker as File objects (nothing is
// uploaded anywhere); the trainer answers "data" (the dataset in use) or "data-error" (why not; the
// current data stays). body[data-dataset] is the dataset in use.

const $ = (id) => document.getElementById(id);

export class DatasetPicker {
  constructor(client) {
    this.client = client;
    this.current = "mnist";
    this.busy = false;
    for (const radio of this.radios()) radio.addEventListener("change", () => this.choose(radio.value));
    // The input is emptied once its files are sent, so that choosing the same (mended) files again counts.
    for (const [id, source] of [["cifar-files", "cifar10"], ["image-folder", "images"]]) {
      $(id).addEventListener("change", (e) => {
        this.sendFiles(source, e.target.files);
        e.target.value = "";
      });
    }
    const drop = $("cifar-pick");
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("over");
      this.sendFiles("cifar10", e.dataTransfer.files);
    });
    client.on("app:data", (m) => this.loaded(m));
    client.on("app:data-error", ({ message }) => this.failed(message));
    client.on("app:data-progress", ({ text }) => this.status(text));
  }

  radios() {
    return document.querySelectorAll('input[name="dataset"]');
  }

  choose(value) {
    $("cifar-pick").hidden = value !== "cifar10";
    $("images-pick").hidden = value !== "images";
    if (value === "mnist" && this.current !== "mnist") {
      this.status("Loading MNIST…");
      this.busy = true;
      this.client.send({ type: "dataset", source: "mnist" });
    } else if (value !== this.current) {
      this.status(value === "cifar10" ? "Choose or drop your CIFAR-10 files." :
        "Choose a folder with one subfolder of images per class.");
    }
  }

  sendFiles(source, fileList) {
    const files = [...fileList];
    if (!files.length) return;
    const size = Number($("image-size").value);
    if (source === "images" && !(Number.isInteger(size) && size >= 8 && size <= 2048)) {
      this.status("Image size: a whole number of pixels from 8 to 2048.", "error");
      return;
    }
    this.status(`Reading ${files.length} file${files.length === 1 ? "" : "s"}…`);
    this.busy = true;
    this.client.worker.postMessage({ type: "dataset-files", source, files, size });
  }

  loaded(m) {
    this.busy = false;
    this.current = m.name;
    document.body.dataset.dataset = m.name;
    for (const radio of this.radios()) radio.checked = radio.value === m.name;
    $("cifar-pick").hidden = m.name !== "cifar10";
    $("images-pick").hidden = m.name !== "images";
    const n = new Intl.NumberFormat("en-US");
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
    return { mnist: "MNIST", cifar10: "CIFAR-10", images: "your images" }[this.current] || this.current;
  }

  status(text, kind = "") {
    $("data-status").textContent = text;
    $("data-status").className = kind || "muted";
  }

  setEnabled(enabled) {
    $("dataset-fields").disabled = !enabled;
    for (const id of ["cifar-files", "image-folder", "image-size"]) $(id).disabled = !enabled;
  }
}
