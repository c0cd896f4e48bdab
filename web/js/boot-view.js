// Boot progress: one bar per stage (Pyodide, the webgrad wheel, MNIST). A stage whose total is not
// known yet shows an indeterminate bar (a <progress> without a value).

const MB = 2 ** 20;

export class BootView {
  constructor(root) {
    this.root = root;
    this.started = performance.now();
  }

  progress({ stage, loaded, total }) {
    const bar = this.root.querySelector(`#boot-${stage}`);
    const text = this.root.querySelector(`#boot-${stage}-text`);
    if (!bar) return;
    if (total > 0) {
      bar.max = total;
      bar.value = Math.min(loaded, total);
      text.textContent = total > MB ? `${(loaded / MB).toFixed(1)} / ${(total / MB).toFixed(1)} MB` :
        (loaded >= total ? "done" : "");
    } else {
      bar.removeAttribute("value");
      text.textContent = loaded > MB ? `${(loaded / MB).toFixed(1)} MB` : "";
    }
  }

  // Everything is up: fold the bars into one line.
  done(text) {
    this.root.classList.add("done");
    this.root.querySelector("#boot-summary").textContent =
      `${text} (${((performance.now() - this.started) / 1000).toFixed(1)} s)`;
  }
}
