"""The training run: hyperparameters checked, the model trained on the GPU, progress reported.

The loop is a coroutine so that the page's messages (pause, stop, a digit to classify) are handled
between steps: `control.checkpoint()` yields to the browser's event loop once per step.

The loss is read back every READ_EVERY steps (a read waits for the GPU), averaged over those steps:
the GPU keeps a running sum. Where steps are slow (a CNN on a software GPU), reads come sooner, at
least every MAX_READ_INTERVAL_S, so that the page hears from the run and Stop acts quickly. Each read
also checks that the loss is finite; a NaN or an infinity stops the run and puts back the last
weights known to give a finite loss (kept on the GPU, see Snapshots).
"""

import math
import time

import webgrad as wg
from webgrad import optim
from webgrad import transforms as T
from webgrad.models import train_step

from . import checkpoint, gputimer, models

READ_EVERY = 10  # steps between loss read-backs
MAX_READ_INTERVAL_S = 1.0  # ... unless that many steps take longer than this
EVAL_BATCH = 500  # samples per forward pass when evaluating (bounds the CNN's im2col buffers)
PROGRESS_EVERY_S = 0.25  # at most this often a progress message between loss reads

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULERS = ("none", "step", "cosine", "onecycle")
# Integer fields: (smallest, largest). The page's form carries the same bounds (web/index.html).
INT_RANGES = {"batch_size": (1, 4096), "epochs": (1, 100), "train_size": (100, 60000), "test_size": (100, 10000)}
# Augmentation (webgrad.transforms on the GPU): field -> (smallest, largest, default); 0 turns it off.
AUGMENT_RANGES = {"crop_padding": (0, 16, 0), "flip_p": (0.0, 1.0, 0.0), "brightness": (0.0, 1.0, 0.0),
                  "contrast": (0.0, 1.0, 0.0), "erasing_p": (0.0, 1.0, 0.0)}


DATASETS = ("mnist", "cifar10", "images")  # what a run's settings may name (apps.mnist.data.Data's names)


def check_config(raw):
    """The run's settings from the page's form, checked; ValueError names the first bad field."""
    cfg = {}
    for key, choices in (("model", tuple(models.NAMES)), ("optimizer", OPTIMIZERS), ("scheduler", SCHEDULERS)):
        value = raw.get(key)
        if value not in choices:
            raise ValueError(f"{key}: {value!r} is not one of {', '.join(choices)}")
        cfg[key] = value
    for key, (lo, hi) in INT_RANGES.items():
        value = raw.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"{key}: {value!r} is not a whole number from {lo} to {hi}")
        cfg[key] = value
    lr = raw.get("lr")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr: {lr!r} is not a positive number")
    cfg["lr"] = float(lr)
    for key, (lo, hi, default) in AUGMENT_RANGES.items():
        value = raw.get(key, default)
        if isinstance(value, float) and isinstance(lo, int) and value.is_integer():
            value = int(value)
        kind = int if isinstance(lo, int) else (int, float)
        if not isinstance(value, kind) or isinstance(value, bool) or not (lo <= value <= hi):
            raise ValueError(f"{key}: {value!r} is not a {'whole ' if kind is int else ''}number from {lo} to {hi}")
        cfg[key] = value
    dataset = raw.get("dataset", "mnist")
    if dataset not in DATASETS:
        raise ValueError(f"dataset: {dataset!r} is not one of {', '.join(DATASETS)}")
    cfg["dataset"] = dataset
    amp = raw.get("amp", False)
    if not isinstance(amp, bool):
        raise ValueError(f"amp: {amp!r} is not true or false")
    cfg["amp"] = amp
    if cfg["batch_size"] > cfg["train_size"]:
        raise ValueError(f"batch_size: {cfg['batch_size']} is larger than the training subset ({cfg['train_size']})")
    return cfg


def make_augment(cfg, shape):
    """The run's augmentation as webgrad.transforms (applied to uint8 batches on the GPU, before the
    normalisation), or [] when every setting is 0."""
    _, h, w = shape
    steps = []
    if cfg["crop_padding"]:
        steps.append(T.RandomCrop((h, w), padding=cfg["crop_padding"]))
    if cfg["flip_p"]:
        steps.append(T.RandomHorizontalFlip(cfg["flip_p"]))
    if cfg["brightness"] or cfg["contrast"]:
        steps.append(T.ColorJitter(brightness=cfg["brightness"], contrast=cfg["contrast"]))
    return steps


def amp_unavailable(device):
    """Why mixed precision cannot run here (a sentence), or None where it can."""
    if device != "webgpu":
        return "mixed precision runs on WebGPU, not on the CPU"
    if not hasattr(wg, "autocast"):
        return "mixed precision needs webgrad.autocast, which this build of webgrad does not have yet"
    try:
        from webgrad import amp  # noqa: F401
    except ImportError:
        return "mixed precision needs webgrad.amp.GradScaler, which this build of webgrad does not have yet"
    features = gputimer.adapter_features()
    if features is not None and "shader-f16" not in features:
        return ("mixed precision needs the WebGPU feature shader-f16 (16-bit floats in shaders), which this GPU "
                "adapter does not offer")
    return None


def make_optimizer(kind, params, lr):
    if kind == "sgd":
        return optim.SGD(params, lr=lr, momentum=0.9)
    if kind == "adam":
        return optim.Adam(params, lr=lr)
    return optim.AdamW(params, lr=lr, weight_decay=0.01)


def make_scheduler(kind, opt, epochs, steps_per_epoch):
    """(scheduler or None, True if it steps every batch / False if every epoch)."""
    sched = optim.lr_scheduler
    if kind == "step":
        return sched.StepLR(opt, step_size=1, gamma=0.7), False
    if kind == "cosine":
        return sched.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch), True
    if kind == "onecycle":
        return sched.OneCycleLR(opt, max_lr=opt.param_groups[0]["lr"], total_steps=epochs * steps_per_epoch), True
    return None, False


class Snapshots:
    """Two GPU copies of the parameters: `good` gave a finite loss; `recent` is the newest, not yet checked.

    At a loss read that is finite, the weights of the previous read (which produced the losses just read)
    are proven good: `recent` becomes `good` and a new `recent` is taken. Copies are GPU-to-GPU.
    """

    def __init__(self, params):
        self.params = list(params)
        with wg.no_grad():
            self.good = [p.detach().clone() for p in self.params]
            self.recent = [p.detach().clone() for p in self.params]

    def confirm(self):
        self.good, self.recent = self.recent, self.good
        with wg.no_grad():
            for r, p in zip(self.recent, self.params):
                r.copy_(p)

    def restore(self):
        with wg.no_grad():
            for p, g in zip(self.params, self.good):
                p.copy_(g)


class Stopwatch:
    """Seconds spent training: stopped while paused or evaluating, so rates and ETAs ignore those."""

    def __init__(self):
        self.elapsed = 0.0
        self._since = None

    def start(self):
        if self._since is None:
            self._since = time.perf_counter()

    def stop(self):
        if self._since is not None:
            self.elapsed += time.perf_counter() - self._since
            self._since = None

    def now(self):
        return self.elapsed + (time.perf_counter() - self._since if self._since is not None else 0.0)


async def evaluate(model, data, n, labels):
    """Predicted classes of the first n test samples (a list), their accuracy and confusion matrix.
    labels: the test labels on the host."""
    model.eval()
    n = min(n, len(data.test))
    k = len(data.classes)
    with wg.no_grad():
        parts = [model(x).argmax(dim=1) for x, _ in data.test_loader(n, EVAL_BATCH)]
    pred = await (wg.cat(parts) if len(parts) > 1 else parts[0]).tolist_async()
    confusion = [[0] * k for _ in range(k)]
    for truth, guess in zip(labels[:n], pred):
        confusion[truth][guess] += 1
    accuracy = sum(confusion[i][i] for i in range(k)) / n
    return {"pred": pred, "accuracy": accuracy, "confusion": confusion}


class Run:
    """One training run of a fresh model. `control` is the App: checkpoint(), post(), report_eval(),
    checkpoints.save()."""

    def __init__(self, cfg, data, device, control):
        self.cfg = cfg
        self.kind = cfg["model"]
        self.train_size = min(cfg["train_size"], len(data.train))  # a small image folder has fewer
        self.augment = make_augment(cfg, data.shape)
        self.loader = data.train_loader(self.train_size, cfg["batch_size"], self.augment)
        self.control = control
        self.model = models.build(self.kind, device, data.shape, len(data.classes))
        self.device = device
        self.steps_per_epoch = len(self.loader)  # the last partial batch is dropped
        self.total_steps = self.steps_per_epoch * cfg["epochs"]
        self.opt = make_optimizer(cfg["optimizer"], self.model.parameters(), cfg["lr"])
        self.sched, self.sched_per_step = make_scheduler(cfg["scheduler"], self.opt, cfg["epochs"], self.steps_per_epoch)
        self.snapshots = Snapshots(self.model.parameters())
        # The step (webgrad.models.train_step, the example's and the benchmarks') is recorded once and then
        # replayed in one call (webgrad.replayable); the scheduler's lr reaches the replays through the
        # optimizer. With mixed precision (the forward pass in float16 under webgrad.autocast, the loss
        # scaled by a GradScaler, the step's .scaler, so that small float16 gradients do not flush to zero)
        # the step runs eagerly: GradScaler decides at each step whether to update.
        amp = "webgpu" if cfg["amp"] else None
        self.train_step = train_step(self.model, self.opt, amp=amp, replay=amp is None)
        # RandomErasing works on the normalised floats: it is the last step of the batch's pipeline
        self.erase = T.RandomErasing(cfg["erasing_p"]) if cfg["erasing_p"] else None
        self.gpu_timer = gputimer.GpuTimer()
        self.clock = Stopwatch()
        self.step = 0  # steps done in this run
        self.epoch = 0  # epochs finished
        self.rate = None  # samples/s over the last read interval

    def _progress(self, epoch, step_in_epoch, loss=None):
        remaining = (self.total_steps - self.step) * self.cfg["batch_size"]
        msg = {
            "type": "progress", "epoch": epoch + 1, "epochs": self.cfg["epochs"],
            "step": step_in_epoch, "steps": self.steps_per_epoch,
            "global_step": self.step, "total_steps": self.total_steps,
            "samples_per_s": self.rate, "eta_s": remaining / self.rate if self.rate else None,
            "lr": self.opt.param_groups[0]["lr"],
            # GPU memory held by tensors, now and at its peak (webgrad.webgpu's counters: no GPU query)
            "memory": wg.webgpu.memory_allocated(), "peak_memory": wg.webgpu.max_memory_allocated(),
            # GPU time per step from timestamp queries (None, with the reason, where there are none)
            "gpu_ms": self.gpu_timer.ms_per_step, "gpu_timer": self.gpu_timer.unavailable,
        }
        if loss is not None:
            msg["loss"] = loss
        self.control.post(msg)

    async def run(self):
        """Train; returns ("done" | "stopped" | "diverged", message)."""
        cfg, B = self.cfg, self.cfg["batch_size"]
        loss_sum = wg.zeros((), device=self.device)
        pending, mark_step, mark_time, last_post = 0, self.step, self.clock.now(), 0.0
        read_every = READ_EVERY
        self.clock.start()
        # A run restored from a checkpoint (checkpoint.restore) starts at its epoch and step.
        for epoch in range(self.epoch, cfg["epochs"]):
            self.model.train()
            for s, (x, y) in checkpoint.batches(self, epoch):  # the epoch's order: one upload of a permutation
                self.clock.stop()
                if await self.control.checkpoint() == "stop":
                    return "stopped", f"stopped after {self.step} steps (epoch {epoch + 1}, step {s})"
                self.clock.start()
                if self.erase is not None:
                    x = self.erase(x)
                loss = self.train_step(x, y)
                if self.sched is not None and self.sched_per_step:
                    self.sched.step()
                loss_sum.add_(loss.detach())
                pending += 1
                self.step += 1
                if pending >= read_every or s == self.steps_per_epoch - 1:
                    mean = await loss_sum.item_async() / pending
                    loss_sum.zero_()
                    now = self.clock.now()
                    step_s = max(now - mark_time, 1e-9) / (self.step - mark_step)
                    self.rate = B / step_s
                    read_every = max(1, min(READ_EVERY, int(MAX_READ_INTERVAL_S / step_s)))
                    mark_step, mark_time, pending = self.step, now, 0
                    if not math.isfinite(mean):
                        self.snapshots.restore()
                        return "diverged", (f"the loss became {mean} at step {self.step} (epoch {epoch + 1}): "
                                            "training stopped and the last weights with a finite loss were "
                                            "put back; try a smaller learning rate")
                    self.snapshots.confirm()
                    self.gpu_timer.mark(self.step)
                    self._progress(epoch, s + 1, mean)
                    last_post = now
                elif self.clock.now() - last_post > PROGRESS_EVERY_S:
                    self._progress(epoch, s + 1)
                    last_post = self.clock.now()
            if self.sched is not None and not self.sched_per_step:
                self.sched.step()
            self.clock.stop()
            self.epoch = epoch + 1
            await self.control.report_eval(self.model, epoch + 1)
            self.gpu_timer.rebase(self.step)  # the evaluation's GPU time is not a step's
            self.control.keep_weights(f"epoch {epoch + 1}")
            await self.control.checkpoints.save(self, "epoch")
            self.clock.start()
        self.clock.stop()
        return "done", f"trained {cfg['epochs']} epoch(s), {self.step} steps in {self.clock.elapsed:.1f} s"
