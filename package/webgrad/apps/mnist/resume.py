"""Checkpoints as the App uses them: saved every epoch and on Pause, offered after a reload, resumed on
request or after a lost GPU device.

- save: the run's state (checkpoint.capture) goes to the store (storage.py: OPFS or IndexedDB in the page),
  and a copy stays in memory: a lost device resumes from it even where the browser keeps nothing.
- offer (when the App starts serving): the newest stored checkpoint that passes its checks is offered to the
  page; one that fails is named with the reason, and nothing is loaded or deleted.
- resume: the settings, model, optimizer, scheduler, progress and the charts' curves come back, and the run
  continues from the step it was saved at.
- a new run replaces the checkpoint (the page says so); a finished run removes it, as nothing is left to
  resume.

Messages from the page: {type: "resume-checkpoint"} | {type: "discard-checkpoint"}
Messages to the page:   checkpoint-offer {summary, where, warning}, checkpoint-saved {summary, where},
                        checkpoint-error {message, context: offer | resume | save | discard},
                        checkpoint-discarded {why: asked | done}; and a resumed run's
                        state message carries {resumed: {...summary, message}, history}.
"""

import copy
import traceback

from . import checkpoint, models, train
from .checkpoint import CheckpointError

MESSAGES = ("resume-checkpoint", "discard-checkpoint")
# dataset id in a run's settings -> its name on the page
DATASETS = {"mnist": "MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "images": "your images", "text": "Text"}
CURVES = ("loss", "accuracy", "val_loss")  # the charts' curves a checkpoint keeps


def _sentence(error):
    text = str(error)
    return f"{text[:1].upper()}{text[1:]}."


def _names(cfg):
    dataset = cfg.get("dataset", "mnist")
    model = cfg.get("model")
    return {"model": models.GPT_TITLES.get(model) or models.NAMES.get(model, model),
            "dataset": DATASETS.get(dataset, dataset)}


class Checkpoints:
    def __init__(self, app, store):
        self.app = app
        self.store = store  # None: checkpoints are kept in memory only
        self.history = {k: [] for k in CURVES}  # the charts' curves of the current run
        self.recording = False
        self.sample = None  # a GPT's run: its last sample of text {step, prompt, text, ...}, kept with the curves
        self.latest = None  # bytes of the current run's newest checkpoint
        self.lost = None  # why the device was lost, for the message of the run resumed after it

    def post(self, msg):
        self.app.post(msg)

    def error(self, context, message, trace=None):
        """context: what failed, "offer" | "resume" | "save" | "discard" (the page shows a failed save apart)."""
        msg = {"type": "checkpoint-error", "context": context, "message": message}
        if trace:
            msg["trace"] = trace
        self.post(msg)

    @property
    def where(self):
        return self.store.kind if self.store is not None else None

    # ------------------------------------------------------------------ the curves
    def observe(self, msg):
        """Every message the App sends passes here: the loss and accuracy points the charts draw are kept."""
        if not self.recording:
            return
        kind = msg.get("type")
        if kind == "progress" and "loss" in msg:
            self.history["loss"].append([msg["global_step"], msg["loss"]])
        elif kind == "eval" and msg.get("source") == "train":
            self.history["accuracy"].append([msg["epoch"], msg["accuracy"]])
        elif kind == "text-eval" and msg.get("source") == "train":
            self.history["val_loss"].append([msg["step"], msg["val_loss"]])
        elif kind == "sample":
            self.sample = {k: v for k, v in msg.items() if k != "type"}

    # ------------------------------------------------------------------ a run's life
    async def begin(self, run, resume):
        """Called by App._train once the Run is built. resume: None for a new run, else (state, summary).
        Returns the extra fields of the run's first state message, or None when the checkpoint does not fit
        (the page has been told why; the App's model is unchanged)."""
        if resume is None:
            await self.discard(quiet=True)
            self.history = {k: [] for k in CURVES}
            self.sample = None
            self.recording = True
            return {}
        state, summary = resume
        try:
            checkpoint.restore(run, state)
        except CheckpointError as e:
            self.lost = None
            self.error("resume", f"The checkpoint could not be resumed: {e}. It was kept; nothing changed.")
            return None
        history = state.get("history") or {}
        self.history = {k: [list(p) for p in history.get(k, [])] for k in CURVES}
        self.sample = state.get("sample")
        self.recording = True
        epoch, step = checkpoint.position(run)
        where = f"epoch {min(epoch + 1, run.cfg['epochs'])}, step {step} of {run.steps_per_epoch}"
        if run.cfg["dataset"] == "text":
            where = f"step {run.step} of {run.total_steps}"
        text = f"Resumed from the checkpoint of {where} (global step {run.step} of {run.total_steps})."
        lost = bool(self.lost)
        if lost:
            text = (f"The GPU device was lost ({self.lost}). webgrad opened a new one and resumed training from the "
                    f"checkpoint of {where}.")
            self.lost = None
        return {"resumed": dict(summary, message=text, lost=lost), "history": copy.deepcopy(self.history),
                "sample": copy.deepcopy(self.sample)}

    async def end(self, run, outcome):
        """Called by App._train before it reports the run's end."""
        self.recording = False
        if outcome == "done":
            await self.discard(why="done")  # nothing is left to resume
        elif outcome == "device-lost" and self.latest is not None:
            self.lost = self.app.lost
            self.app.receive({"type": "resume-checkpoint", "after": "device-lost"})  # once the device is back

    async def save(self, run, reason):
        """Checkpoint `run` (between two steps): reason "pause" | "epoch". A failure is reported, never raised:
        training goes on."""
        try:
            state, summary = checkpoint.capture(run, self.history, reason, _names(run.cfg))
            state["sample"] = self.sample
            data = checkpoint.pack(state, summary)
        except Exception as e:
            if self.app.lost:
                return  # the device is gone; the run stops at its next step and resumes from the last one
            self.error("save", f"The checkpoint could not be made: {type(e).__name__}: {e}", traceback.format_exc())
            return
        self.latest = data
        if self.store is not None:
            try:
                await self.store.save(data)
            except Exception as e:
                self.error("save", f"The checkpoint could not be written to {self.where} ({e}); it is kept in memory "
                           "only, so it will not survive a reload.")
                return
        self.post({"type": "checkpoint-saved", "summary": summary, "where": self.where, "bytes": len(data)})

    # ------------------------------------------------------------------ the page's requests
    async def _stored(self):
        """The stored checkpoints' bytes, newest first; CheckpointError if the store cannot be read."""
        if self.store is None:
            return []
        try:
            items = await self.store.load()
        except Exception as e:
            raise CheckpointError(f"the saved checkpoints cannot be read from {self.where} ({e})") from None
        return items

    async def offer(self):
        """Tell the page of a checkpoint a reload (or a crash) left behind."""
        try:
            items = await self._stored()
        except CheckpointError as e:
            self.error("offer", _sentence(e))
            return
        problems = []
        for data in items:
            try:
                summary, _ = checkpoint.peek(data)
            except CheckpointError as e:
                problems.append(str(e))
                continue
            warning = (f"The newest checkpoint cannot be used ({problems[0]}); this is the one saved before it."
                       if problems else None)
            self.post({"type": "checkpoint-offer", "summary": summary, "where": self.where, "warning": warning})
            return
        if problems:
            self.error("offer", f"A saved checkpoint was found in {self.where} but cannot be used: {problems[0]}. "
                       "Nothing was loaded; Discard removes it.")

    async def handle(self, msg):
        if msg["type"] == "discard-checkpoint":
            await self.discard()
        else:
            await self.resume(after_loss=msg.get("after") == "device-lost")

    async def resume(self, after_loss=False):
        if after_loss and self.latest is not None:
            candidates = [self.latest]
        else:
            candidates = await self._candidates()
        problems = []
        for data in candidates or ():
            try:
                state, summary = checkpoint.unpack(data, self.app.device, checkpoint.RUN_KEYS)
                train.check_config(state["config"])
            except CheckpointError as e:
                problems.append(str(e))
                continue
            except ValueError as e:  # settings this page no longer accepts
                problems.append(f"its settings are not valid on this page ({e})")
                continue
            why = await self._data_for(state)
            if why:
                self.lost = None
                self.error("resume", why)
                return
            self.latest = data  # until the resumed run saves its own: a lost device goes back to this one
            await self.app._train(state["config"], resume=(state, summary))  # begin() uses self.lost and clears it
            return
        self.lost = None
        if candidates is not None:
            self.error("resume", "There is no checkpoint to resume" +
                       (f": {problems[0]}. Nothing was loaded." if problems else "."))

    async def _data_for(self, state):
        """Make sure the page holds the data the checkpoint trained on: None when it does (the bundled text is
        loaded here if need be), else what the user must do first."""
        dataset = state["config"].get("dataset", "mnist")
        info = state.get("data") or {}
        data = self.app.data  # the dataset the page holds now
        if dataset == "text" and info.get("source") == "sample" and (
                data is None or data.name != "text" or data.digest != info.get("sha256")):
            await self.app._dataset({"source": "text-sample"})  # the bundled text: no file to choose
            data = self.app.data
        label = info.get("label") or DATASETS.get(dataset, dataset)
        if data is None or data.name != dataset:
            return (f"This checkpoint trained on {DATASETS.get(dataset, dataset)} ({label}): load that dataset first "
                    "(Data, above), then Resume.")
        if dataset == "text" and info.get("sha256") not in (None, data.digest):
            return (f"This checkpoint trained on another text ({label}); the page holds {data.label}: choose the text "
                    "it trained on (Data, above), then Resume.")
        return None

    async def _candidates(self):
        try:
            return await self._stored()
        except CheckpointError as e:
            self.error("resume", _sentence(e))
            return None

    async def discard(self, quiet=False, why="asked"):
        """Remove the stored checkpoints and the memory copy. why: "asked" (the page's Discard) | "done"."""
        had = self.latest is not None
        self.latest = None
        if self.store is not None:
            try:
                await self.store.discard()
                had = True
            except Exception as e:
                self.error("discard", f"The checkpoint could not be removed from {self.where} ({e}).")
                return
        if had and not quiet:
            self.post({"type": "checkpoint-discarded", "why": why})
