// The hyperparameter form: read, checked in the page before anything is sent to the worker. The form
// has novalidate so that its submit handler runs and can say everything that is wrong at once.
// The HTML attributes (required, min, max, step) carry the per-field rules and the browser's own
// messages; check() adds what attributes cannot say (batch size vs. training subset) and puts every
// problem in one message next to the buttons. The worker checks again (webgrad/apps/mnist/train.py).
// Fields of one kind of dataset only (class images-only or text-only) are disabled for the other: a disabled
// field is neither checked nor sent.

export class TrainForm {
  constructor(form, errorEl) {
    this.form = form;
    this.errorEl = errorEl;
    // A field edited back to a valid value clears its message.
    form.addEventListener("input", (e) => {
      e.target.setCustomValidity?.("");
      if (this.errorEl.textContent) this.check({ quiet: true });
    });
  }

  field(name) {
    return this.form.elements[name];
  }

  // "images" | "text": the fields that apply to that kind of dataset.
  setMode(mode) {
    this.mode = mode;
    for (const el of this.form.querySelectorAll("input.images-only, input.text-only, .images-only input")) {
      el.disabled = mode === "text" ? !el.matches(".text-only") : el.matches(".text-only");
    }
  }

  // The settings as numbers and strings, or null (after showing why) when some are invalid.
  read() {
    return this.check({ quiet: false }) ? this.values() : null;
  }

  values() {
    const num = (name) => Number(this.field(name).value);
    if (this.mode === "text") {
      return {
        model: this.field("model").value, optimizer: this.field("optimizer").value,
        scheduler: this.field("scheduler").value, lr: num("lr"), batch_size: num("batch_size"), steps: num("steps"),
        sample_every: num("sample_every"), amp: this.field("amp").checked && !this.field("amp").disabled,
      };
    }
    return {
      model: this.field("model").value,
      optimizer: this.field("optimizer").value,
      scheduler: this.field("scheduler").value,
      lr: num("lr"),
      batch_size: num("batch_size"),
      epochs: num("epochs"),
      train_size: num("train_size"),
      test_size: num("test_size"),
      // augmentation on the GPU (0 = off) and mixed precision
      crop_padding: num("crop_padding"),
      flip_p: num("flip_p"),
      brightness: num("brightness"),
      contrast: num("contrast"),
      erasing_p: num("erasing_p"),
      amp: this.field("amp").checked && !this.field("amp").disabled,
    };
  }

  check({ quiet }) {
    const batch = this.field("batch_size"), train = this.field("train_size");
    batch.setCustomValidity("");
    const checked = this.mode !== "text" && batch.validity.valid && train.validity.valid;
    if (checked && Number(batch.value) > Number(train.value)) {
      batch.setCustomValidity(`The batch size cannot exceed the training subset (${train.value}).`);
    }
    const problems = [];
    for (const el of this.form.querySelectorAll("input, select")) {
      if (el.willValidate === false) {
        el.removeAttribute("aria-invalid");
      } else if (!el.validity.valid) {
        el.setAttribute("aria-invalid", "true");
        problems.push(`${labelOf(el)}: ${el.validationMessage}`);
      } else {
        el.removeAttribute("aria-invalid");
      }
    }
    this.errorEl.textContent = problems.join(" ");
    if (problems.length && !quiet) this.form.reportValidity();
    return problems.length === 0;
  }

  setEnabled(enabled) {
    for (const fieldset of this.form.querySelectorAll("fieldset")) fieldset.disabled = !enabled;
  }

  showError(text) {
    this.errorEl.textContent = text;
  }
}

function labelOf(el) {
  const label = el.labels && el.labels[0];
  return label ? label.textContent.replace(/\s+/g, " ").trim() : el.name;
}
