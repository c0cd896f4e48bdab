"""The page's Python side: one App per worker. It owns the data, the model and the training run, and
talks to the page only through messages (dicts): `receive(msg)` queues one, `post(msg)` sends one.

One coroutine, `serve()`, handles the messages in order. While a run trains, the run calls
`checkpoint()` between steps, which handles the messages that arrived meanwhile (pause, resume, stop,
a digit to classify, an export), so the GPU is only ever used by one piece of code at a time.

Messages from the page:  {type: "train", config} | "pause" | "resume" | "stop" |
                         {type: "predict", id, pixels: 784 bytes} | "export" | {type: "import", data, name} |
                         {type: "dataset", source: "mnist" | "cifar10" | "cifar100" (root) | "images" (pixels,
                          labels, classes, size, skipped, resized, name) | "text" (data: the file's bytes, name)
                          | "text-sample"} | {type: "data-error", message} |
                         {type: "generate", id, prompt, length, temperature} (Text: continue the prompt)
Messages to the page:    data, data-error, state, progress, eval, run-end, probs, exported, imported,
                         import-error, recovered, error (see the `post` calls; each has a "type"); for Text,
                         text-eval {step, val_loss, source}, sample {step, prompt, text} and generated
                         {id, text, done, error}.
Checkpoints (resume.py): "resume-checkpoint" | "discard-checkpoint" from the page, checkpoint-* to it.

A lost GPU device (reported by the worker through device_lost) ends a run; the App then opens a new
device, uploads the data again and puts back the weights it last copied to the host (at the start of
each run, after each epoch and when a run ends); a run that had saved a checkpoint then resumes from it.
"""

import asyncio
import collections
import io
import traceback

import webgrad as wg
import webgrad.nn.functional as F
from webgrad import webgpu

from . import models, resume, storage, train
from .data import PIXELS, Data, DataError, TextData

GRID = 48  # test digits shown with their predictions (the first ones of the test set)


class App:
    def __init__(self, post, device="webgpu", store=None):
        self._post = post
        self.device = device
        self.inbox = collections.deque()
        self._arrived = asyncio.Event()
        self.root = self.data = None
        self.test_labels = None  # on the host, for confusion matrices
        self.model = self.kind = None
        self.test_size = 10000  # samples evaluated (the last run's setting)
        self.run = None  # the Run in progress
        self.paused = self.stop_requested = False
        self.lost = None  # why the GPU device was lost, until a new one is open
        self.saved = None  # {"data": safetensors bytes, "kind", "label"}: the weights' last host copy
        self.last_eval = None
        # checkpoints (issue 12): every epoch and on Pause, to `store` (the page's OPFS/IndexedDB by default)
        self.checkpoints = resume.Checkpoints(self, store if store is not None else storage.default_store())

    # ------------------------------------------------------------------ messages

    def post(self, msg):
        self.checkpoints.observe(msg)  # the charts' curves, kept for the checkpoints
        self._post(msg)

    def receive(self, msg):
        """Queue a message from the page; serve() or checkpoint() handles it."""
        self.inbox.append(msg)
        self._arrived.set()

    async def _wait_for_message(self):
        while not self.inbox:
            self._arrived.clear()
            await self._arrived.wait()

    async def serve(self):
        """Handle messages forever (the worker starts this once the data is on the GPU)."""
        await self.checkpoints.offer()  # a checkpoint left by an earlier page: offer to resume it
        while True:
            await self._wait_for_message()
            msg = self.inbox.popleft()
            try:
                await self._handle_idle(msg)
            except Exception as e:  # a bug or a GPU failure must not end the loop: report it
                self.post({"type": "error", "message": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()})

    async def _handle_idle(self, msg):
        kind = msg["type"]
        if self.lost and kind != "export":
            await self._recover()
        if kind == "train":
            await self._train(msg["config"])
        elif kind == "predict":
            await self._predict(self._latest_predict(msg))
        elif kind == "generate":
            await self._generate(msg)
        elif kind == "export":
            await self._export()
        elif kind == "import":
            await self._import(msg["data"], msg.get("name", "file"), msg.get("test_size"))
        elif kind in resume.MESSAGES:
            await self.checkpoints.handle(msg)
        elif kind == "dataset":
            await self._dataset(msg)
        elif kind == "data-error":  # the worker could not read the user's files: nothing changes here
            self.post({"type": "data-error", "message": msg["message"]})
        # pause/resume/stop outside a run, device-lost once recovered: nothing more to do

    def _latest_predict(self, msg):
        """Drop queued predict requests older than the newest one (the user kept drawing)."""
        newer = [m for m in self.inbox if m["type"] == "predict"]
        if newer:
            self.inbox = collections.deque(m for m in self.inbox if m["type"] != "predict")
            msg = newer[-1]
        return msg

    async def checkpoint(self):
        """Called by the run between steps: yield to the browser, handle what arrived; "stop" ends the run."""
        await asyncio.sleep(0)  # a browser task boundary: the page's messages are delivered here
        while True:
            while self.inbox:
                msg = self.inbox.popleft()
                kind = msg["type"]
                if kind == "pause" and not self.paused:
                    self.paused = True
                    self.post({"type": "state", "state": "paused"})
                    await self.checkpoints.save(self.run, "pause")
                elif kind == "resume" and self.paused:
                    self.paused = False
                    self.post({"type": "state", "state": "training"})
                elif kind == "stop":
                    self.stop_requested = True
                elif kind == "predict":
                    await self._predict(self._latest_predict(msg))
                elif kind == "generate":
                    await self._generate(msg)
                elif kind == "export":
                    await self._export()
                elif kind in ("train", "import", "dataset"):
                    self.post({"type": "error", "message": f"cannot {kind} while training: stop the run first"})
            if self.stop_requested or self.lost:
                return "stop"
            if not self.paused:
                return None
            await self._wait_for_message()

    # ------------------------------------------------------------------ data

    async def load_data(self, root):
        """Upload MNIST (the IDX files in folder `root`) to the GPU; send the grid's pixels and labels."""
        self.root = root
        await self._use(Data.mnist(root, self.device))

    async def _use(self, data):
        """Make `data` the current dataset; send what the page shows of it."""
        self.data = data
        if data.name == "text":
            self.test_labels = None
            self.post({
                "type": "data", "name": "text", "label": data.label, "source": data.source, "tokens": data.kind,
                "vocab_size": len(data.vocab), "characters": data.chars, "notes": data.notes,
                "train_size": len(data.train), "test_size": len(data.test), "unigram": data.unigram,
                "preview": data.preview, "models": models.gpt_choices(len(data.vocab)),
                "model": self.kind or "none",
            })
            return
        self.test_labels = await data.test_labels()
        c, h, w = data.shape
        self.post({
            "type": "data", "name": data.name, "label": data.label, "classes": data.classes,
            "channels": c, "height": h, "width": w, "notes": data.notes,
            "train_size": len(data.train), "test_size": len(data.test),
            "grid_pixels": await data.test_pixels(GRID), "grid_labels": self.test_labels[:GRID],
            "model": self.kind or "none",  # the model kept (same inputs and classes), or none
        })

    async def _dataset(self, msg):
        """Switch to the dataset the page sent; on any problem with it the current data and model stay."""
        source = msg.get("source")
        try:
            if source == "mnist":
                data = Data.mnist(self.root, self.device)
            elif source == "cifar10":
                data = Data.cifar10(msg["root"], self.device)
            elif source == "cifar100":
                data = Data.cifar100(msg["root"], self.device)
            elif source == "text":
                data = TextData(msg["data"], msg.get("name") or "your text", self.device)
            elif source == "text-sample":
                data = TextData.sample(self.device)
            elif source == "images":
                data = Data.images(msg["pixels"], msg["labels"], msg["classes"], msg["size"], self.device,
                                   msg.get("skipped", 0), msg.get("resized", 0), msg.get("name") or "your images")
            else:
                raise DataError(f"unknown dataset source {source!r}")
        except DataError as e:
            self.post({"type": "data-error", "message": str(e)})
            return
        if data.name == "text" or (self.data is not None and self.data.name == "text"):
            # a GPT reads token ids: it fits a text of the same tokens only
            fits = (self.model is not None and data.name == self.data.name == "text" and data.kind == self.data.kind
                    and data.vocab == self.data.vocab)
        else:
            fits = (self.model is not None and self.data is not None and data.shape == self.data.shape
                    and len(data.classes) == len(self.data.classes))
        if not fits:  # the model was made for other inputs or classes
            self.model = self.kind = self.saved = None
            self.last_eval = None
        await self._use(data)

    # ------------------------------------------------------------------ training

    async def _train(self, raw_config, resume=None):
        """A new run, or with resume=(state, summary) of a checkpoint, the run it holds, continued."""
        try:
            # the run trains on the dataset loaded now (a resumed one was checked to match it)
            cfg = train.check_config({**raw_config, "dataset": self.data.name if self.data else "mnist"})
        except ValueError as e:
            self.post({"type": "run-end", "outcome": "invalid", "message": str(e)})
            return
        why = train.check_run(cfg, self.data, self.device)
        if why:
            self.post({"type": "run-end", "outcome": "invalid", "message": why})
            return
        if cfg["amp"]:
            why = train.amp_unavailable(self.device)
            if why:
                self.post({"type": "run-end", "outcome": "invalid", "message": f"Mixed precision: {why}."})
                return
        self.test_size = cfg.get("test_size", self.test_size)
        self.paused = self.stop_requested = False
        self.run = run = (train.TextRun if cfg["dataset"] == "text" else train.Run)(cfg, self.data, self.device, self)
        resumed = await self.checkpoints.begin(run, resume)  # a resumed run gets the checkpoint's state
        if resumed is None:
            self.run = None
            return
        # The new model answers predictions from its first step on.
        self.model, self.kind = run.model, run.kind
        self.keep_weights("initialisation" if resume is None else "the checkpoint")
        self.post({"type": "state", "state": "training", "config": cfg, "steps_per_epoch": run.steps_per_epoch,
                   "total_steps": run.total_steps,
                   "model": models.describe(run.kind, self.data.shape, len(self.data.classes)), **resumed})
        try:
            outcome, message = await run.run()
        except Exception:
            if not await self._was_lost():
                raise
            outcome, message = "device-lost", f"the GPU device was lost ({self.lost}) after {run.step} steps"
        finally:
            self.run = None
            self.paused = False
        if outcome == "stopped" and self.lost:
            outcome, message = "device-lost", f"the GPU device was lost ({self.lost}) after {run.step} steps"
        if outcome in ("done", "stopped", "diverged"):
            self.keep_weights(f"step {run.step}")
        await self.checkpoints.end(run, outcome)  # done: removed; device lost: resumed once a new one is open
        self.post({"type": "run-end", "outcome": outcome, "message": message, "steps": run.step,
                   "epochs_done": run.epoch})
        if self.lost:
            await self._recover()

    async def report_eval(self, model, epoch, source="train"):
        """Evaluate on the test subset and send accuracy, confusion matrix and the grid's predictions."""
        result = await train.evaluate(model, self.data, self.test_size, self.test_labels)
        self.last_eval = result
        self.post({"type": "eval", "source": source, "epoch": epoch, "accuracy": result["accuracy"],
                   "confusion": result["confusion"], "grid_pred": result["pred"][:GRID],
                   "test_size": min(self.test_size, len(self.data.test))})

    async def report_text(self, run):
        """Every sample_every steps of a GPT's run: the validation loss, then a sample continuation of the text's
        usual prompt generated on the GPU."""
        await self._report_val_loss(run.model, run.block_size, run.step)
        prompt = self.data.default_prompt()
        text = await train.generate(run.model, self.data, prompt, train.SAMPLE_TOKENS)
        self.post({"type": "sample", "step": run.step, "prompt": prompt, "text": text,
                   "temperature": train.SAMPLE_TEMPERATURE, "top_k": train.SAMPLE_TOP_K})

    async def _report_val_loss(self, model, block_size, step, source="train"):
        val_loss = await train.evaluate_text(model, self.data, block_size)
        self.post({"type": "text-eval", "source": source, "step": step, "val_loss": val_loss,
                   "unigram": self.data.unigram})

    def _weights(self):
        """The model's weights as safetensors bytes (a GPT's with its config and vocabulary in the metadata)."""
        buf = io.BytesIO()
        meta = models.gpt_metadata(self.model, self.kind, self.data) if models.is_gpt(self.kind) else None
        wg.save(self.model.state_dict(), buf, metadata=meta)
        return buf.getvalue()

    def keep_weights(self, label):
        """Copy the model's weights to the host (safetensors bytes): what survives a lost GPU device."""
        self.saved = {"data": self._weights(), "kind": self.kind, "label": label}

    # ------------------------------------------------------------------ the GPU device

    def device_lost(self, reason):
        """Called by the worker when WebGPU reports the device lost (GPU reset, driver update, destroy())."""
        self.lost = reason or "unknown reason"
        self.receive({"type": "device-lost"})  # ends a run at its next step, or wakes serve()

    async def _was_lost(self, wait_s=2.0):
        """After a GPU operation failed: was the device lost? (The failure can arrive before the news.)"""
        for _ in range(int(wait_s / 0.05)):
            if self.lost:
                return True
            await asyncio.sleep(0.05)
        return bool(self.lost)

    async def _recover(self):
        """Open a new GPU device, upload the data again and put back the last host copy of the weights."""
        reason = self.lost
        webgpu.reset()  # the next GPU tensor opens a new device
        self.lost = None
        try:
            self.data = self.data.rebuild(self.device)
            if self.saved is not None:
                self.kind, self.model = self._load(self.saved["data"], "the saved weights")
            else:
                self.model = self.kind = None
        except Exception as e:
            self.lost = reason
            self.post({"type": "error", "message": f"the GPU device was lost ({reason}) and no new one could be "
                       f"opened ({type(e).__name__}: {e}); reload the page", "trace": traceback.format_exc()})
            return
        what = (f"the weights from {self.saved['label']} were put back" if self.saved is not None
                else "there were no weights to put back")
        self.post({"type": "recovered", "model": self.kind,
                   "message": f"The GPU device was lost ({reason}). webgrad opened a new one and {what}."})

    # ------------------------------------------------------------------ predictions, files

    def _load(self, data, name):
        """(kind, model) of a weights file for the data in use."""
        if self.data.name == "text":
            return models.load_gpt(data, self.device, name, self.data)
        return models.load_model(data, self.device, name, self.data.shape, len(self.data.classes))

    async def _generate(self, msg):
        """The prompt box: continue msg["prompt"] by msg["length"] tokens, streamed to the page."""
        ident = msg.get("id")

        async def partial(text):
            self.post({"type": "generated", "id": ident, "text": text, "done": False})
            await asyncio.sleep(0)

        if self.data is None or self.data.name != "text" or self.model is None or not models.is_gpt(self.kind):
            self.post({"type": "generated", "id": ident, "done": True,
                       "error": "Train a GPT on a text (or import one) first: then it continues your prompt."})
            return
        try:
            length = int(msg.get("length", 200))
            temperature = float(msg.get("temperature", train.SAMPLE_TEMPERATURE))
            if not 1 <= length <= 2000:
                raise ValueError(f"length: {length} is not a whole number from 1 to 2000")
            if not 0.05 <= temperature <= 5:
                raise ValueError(f"temperature: {temperature} is not from 0.05 to 5")
            text = await train.generate(self.model, self.data, str(msg.get("prompt", "")), length, temperature,
                                        on_text=partial)
        except (ValueError, TypeError) as e:  # DataError (a character the text lacks) included
            self.post({"type": "generated", "id": ident, "done": True, "error": str(e)})
            return
        self.post({"type": "generated", "id": ident, "text": text, "done": True})

    async def _predict(self, msg):
        if self.model is None:
            self.post({"type": "probs", "id": msg.get("id"), "probs": None,
                       "message": "Train a model or import one to see its guesses."})
            return
        if self.data.shape != (1, 28, 28) or len(self.data.classes) != 10:
            self.post({"type": "probs", "id": msg.get("id"), "probs": None,
                       "message": "Drawing works with MNIST models; this model reads other images."})
            return
        pixels = bytes(msg["pixels"])
        if len(pixels) != PIXELS:
            raise ValueError(f"predict: expected {PIXELS} pixels, got {len(pixels)}")
        x = wg.frombuffer(pixels, dtype=wg.uint8, device=self.device) * (1.0 / 255)
        with wg.no_grad():
            probs = F.softmax(self.model(x.view(1, 1, 28, 28)), dim=1)
        self.post({"type": "probs", "id": msg.get("id"), "probs": await probs.view(10).tolist_async()})

    async def _export(self):
        if self.model is None:
            self.post({"type": "error", "message": "nothing to export yet: train a model or import one first"})
            return
        if self.lost:  # the GPU's copy is gone: export the host copy
            data, kind = self.saved["data"], self.saved["kind"]
        else:
            data, kind = self._weights(), self.kind
        self.post({"type": "exported", "data": data, "filename": f"webgrad-{self.data.name}-{kind}.safetensors", "kind": kind})

    async def _import(self, data, name, test_size=None):
        """Load weights from a .safetensors file; on any problem the current model stays as it was.
        The model is then evaluated on `test_size` test digits (default: as many as last time)."""
        lo, hi = train.INT_RANGES["test_size"]
        if isinstance(test_size, int) and lo <= test_size <= hi:
            self.test_size = test_size
        try:
            kind, model = self._load(data, name)
        except (ValueError, RuntimeError, KeyError, TypeError) as e:
            self.post({"type": "import-error", "message": str(e)})
            return
        self.model, self.kind = model, kind
        self.keep_weights(f"the import of {name}")
        config = getattr(model, "config", None)
        self.post({"type": "imported", "kind": kind, "name": name,
                   "model": models.describe(kind, self.data.shape, len(self.data.classes), config)})
        if self.data.name == "text":
            await self._report_val_loss(model, model.config.block_size, None, source="import")
        else:
            await self.report_eval(model, None, source="import")

