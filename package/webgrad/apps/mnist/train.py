"""The training run: hyperparameters checked, the model trained on the GPU, progress reported. Run trains
an image classifier epoch by epoch; TextRun a GPT on the Text dataset, step by step, with the validation loss
and a sample of generated text every `sample_every` steps.

The loop is a coroutine so that the page's messages (pause, stop, a digit to classify) are handled
between steps: `control.checkpoint()` yields to the browser's event loop once per step.

The loss is read back every READ_EVERY steps (a read waits for the GPU), averaged over those steps:
the GPU keeps a running sum. Where steps are slow (a CNN on a software GPU), reads come sooner, at
least every MAX_READ_INTERVAL_S, so that the page hears from the run and Stop acts quickly. Each read
also checks that the loss is finite; a NaN or an infinity stops the run and puts back the last
weights known to give a finite loss (kept on the GPU, see Snapshots).

The first steps of a run record the step for replay (webgrad.replayable: an eager step, then a recorded one,
maybe a second recording with a memory plan); on a software GPU they take seconds each while the shaders
compile. While they run, progress messages say "preparing", each of them is read back, and the rate counts
only the steps after them.
"""

import math
import time

import webgrad as wg
from webgrad import optim
from webgrad import transforms as T
from webgrad.models import train_step

from . import checkpoint, gputimer, models
from .data import buffer_limit

READ_EVERY = 10  # steps between loss read-backs
MAX_READ_INTERVAL_S = 1.0  # ... unless that many steps take longer than this
EVAL_BATCH = 500  # samples per forward pass when evaluating (bounds the CNN's im2col buffers)
PROGRESS_EVERY_S = 0.25  # at most this often a progress message between loss reads

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULERS = ("none", "step", "cosine", "onecycle")
# Integer fields: (smallest, largest). The page's form carries the same bounds (web/index.html).
INT_RANGES = {"batch_size": (1, 4096), "epochs": (1, 100), "train_size": (1, 60000), "test_size": (1, 10000)}
# The Text dataset's fields (a GPT's run is counted in steps); the page's form carries the same bounds.
TEXT_INT_RANGES = {"batch_size": (1, 512), "steps": (1, 1_000_000), "sample_every": (1, 1_000_000)}
SAMPLE_TOKENS = 200  # generated every sample_every steps (temperature SAMPLE_TEMPERATURE, top-k SAMPLE_TOP_K)
SAMPLE_TEMPERATURE = 0.8
SAMPLE_TOP_K = 10
VAL_WINDOWS = 32  # windows of the validation split whose mean loss is the validation loss
# Augmentation (webgrad.transforms on the GPU): field -> (smallest, largest, default); 0 turns it off.
AUGMENT_RANGES = {"crop_padding": (0, 16, 0), "flip_p": (0.0, 1.0, 0.0), "brightness": (0.0, 1.0, 0.0),
                  "contrast": (0.0, 1.0, 0.0), "erasing_p": (0.0, 1.0, 0.0)}


DATASETS = ("mnist", "cifar10", "cifar100", "images", "text")  # what a run's settings may name (data.py's names)


def _choices(raw, cfg, key, choices):
    value = raw.get(key)
    if value not in choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(choices)}")
    cfg[key] = value


def _ints(raw, cfg, ranges):
    for key, (lo, hi) in ranges.items():
        value = raw.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"{key}: {value!r} is not a whole number from {lo} to {hi}")
        cfg[key] = value


def _lr_and_amp(raw, cfg):
    lr = raw.get("lr")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr: {lr!r} is not a positive number")
    cfg["lr"] = float(lr)
    amp = raw.get("amp", False)
    if not isinstance(amp, bool):
        raise ValueError(f"amp: {amp!r} is not true or false")
    cfg["amp"] = amp


def check_text_config(raw):
    """The settings of a GPT's run on the Text dataset: model (a GPT size), optimizer, scheduler, lr,
    batch_size, steps, sample_every, amp. epochs is 1: the run is one pass of `steps` steps."""
    cfg = {}
    _choices(raw, cfg, "model", tuple(models.GPT_SIZES))
    _choices(raw, cfg, "optimizer", OPTIMIZERS)
    _choices(raw, cfg, "scheduler", SCHEDULERS)
    _ints(raw, cfg, TEXT_INT_RANGES)
    _lr_and_amp(raw, cfg)
    cfg["epochs"], cfg["dataset"] = 1, "text"
    return cfg


def check_config(raw):
    """The run's settings from the page's form, checked; ValueError names the first bad field."""
    if raw.get("dataset") == "text":
        return check_text_config(raw)
    cfg = {}
    _choices(raw, cfg, "model", tuple(models.NAMES))
    _choices(raw, cfg, "optimizer", OPTIMIZERS)
    _choices(raw, cfg, "scheduler", SCHEDULERS)
    _ints(raw, cfg, INT_RANGES)
    _lr_and_amp(raw, cfg)
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
    if cfg["batch_size"] > cfg["train_size"]:
        raise ValueError(f"batch_size: {cfg['batch_size']} is larger than the training subset ({cfg['train_size']})")
    return cfg


def check_run(cfg, data, device):
    """Why a run of `cfg` cannot train on `data` here (a sentence naming the field), or None."""
    if cfg["dataset"] == "text":
        config = models.gpt_config(cfg["model"], len(data.vocab))
        need = config.block_size + 1
        if len(data.train) < need:
            return (f"model: the {models.GPT_TITLES[cfg['model']]} reads {config.block_size} tokens at a time, and the "
                    f"training part of {data.label} has {len(data.train)}: choose a smaller model or a longer text")
        return models.check_gpt_fits(config, cfg["batch_size"], buffer_limit(device))
    if cfg["batch_size"] > len(data.train):
        return (f"batch_size: {cfg['batch_size']} is larger than the {len(data.train)} training images of "
                f"{data.label}")
    return None


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


async def evaluate_text(model, data, block_size):
    """The mean loss of the GPT on VAL_WINDOWS windows spread over the text's validation split."""
    model.eval()
    x, y = data.val_windows(VAL_WINDOWS, block_size)
    with wg.no_grad():
        _, loss = model(x, y)
    value = await loss.item_async()
    model.train()
    return value


async def generate(model, data, prompt, length, temperature=SAMPLE_TEMPERATURE, top_k=SAMPLE_TOP_K, on_text=None,
                   every=20):
    """`prompt` continued by `length` tokens drawn on the GPU (model.stream: a KV cache, top-k, multinomial);
    the continuation's text. on_text(text so far) is awaited every `every` tokens (each time one read-back)."""
    ids = data.encode(prompt)
    if not ids:
        raise ValueError("the prompt is empty: type a few characters of the text's alphabet")
    model.eval()
    idx = wg.tensor([ids[-model.config.block_size:]], dtype=wg.int64, device=data.device)
    out, chunk = [], []
    try:
        for token in model.stream(idx, length, temperature=temperature, top_k=top_k):
            chunk.append(token)
            if len(chunk) == every or len(out) + len(chunk) == length:
                out += await wg.cat(chunk, dim=1).view(-1).tolist_async()
                chunk = []
                if on_text is not None:
                    await on_text(data.decode(out))
    finally:
        model.train()
    return data.decode(out)


class Run:
    """One training run of a fresh model. `control` is the App: checkpoint(), post(), report_eval(),
    checkpoints.save()."""

    def __init__(self, cfg, data, device, control):
        self.cfg = cfg
        self.kind = cfg["model"]
        self.data_info = data.info()
        self.control = control
        self.device = device
        self.opt = None
        self._setup(cfg, data, device)
        self.opt_for_step()
        self.sched, self.sched_per_step = make_scheduler(cfg["scheduler"], self.opt, cfg["epochs"], self.steps_per_epoch)
        self.snapshots = Snapshots(self.model.parameters())
        self.gpu_timer = gputimer.GpuTimer()
        self.clock = Stopwatch()
        self.step = 0  # steps done in the run (a resumed run starts at its checkpoint's)
        self.epoch = 0  # epochs finished
        self.calls = 0  # steps done by this Run object (the replay records anew after a resume)
        self.rate = None  # samples/s over the last read interval
        self.step_s = None

    def _setup(self, cfg, data, device):
        self.train_size = min(cfg["train_size"], len(data.train))  # a small image folder has fewer
        self.augment = make_augment(cfg, data.shape)
        self.loader = data.train_loader(self.train_size, cfg["batch_size"], self.augment)
        self.model = models.build(self.kind, device, data.shape, len(data.classes))
        self.steps_per_epoch = len(self.loader)  # the last partial batch is dropped
        self.total_steps = self.steps_per_epoch * cfg["epochs"]
        # The step (webgrad.models.train_step, the example's and the benchmarks') is recorded once and then
        # replayed in one call (webgrad.replayable); the scheduler's lr reaches the replays through the
        # optimizer. With mixed precision (the forward pass in float16 under webgrad.autocast, the loss
        # scaled by a GradScaler, the step's .scaler, so that small float16 gradients do not flush to zero)
        # the step runs eagerly: GradScaler decides at each step whether to update.
        amp = "webgpu" if cfg["amp"] else None
        self.train_step = train_step(self.model, self.opt_for_step(), amp=amp, replay=amp is None)
        # RandomErasing works on the normalised floats: it is the last step of the batch's pipeline
        self.erase = T.RandomErasing(cfg["erasing_p"]) if cfg["erasing_p"] else None

    def opt_for_step(self):
        """The optimizer, made here once (train_step needs it before __init__ makes the scheduler)."""
        if self.opt is None:
            self.opt = make_optimizer(self.cfg["optimizer"], self.model.parameters(), self.cfg["lr"])
        return self.opt

    def preparing(self):
        """True while the next step is one of the first ones, which record the step for replay."""
        return self.calls == 0 or (self.calls < 4 and getattr(self.train_step, "replays", 1) == 0)

    def _progress(self, epoch, step_in_epoch, loss=None):
        remaining = self.total_steps - self.step
        msg = {
            "type": "progress", "epoch": epoch + 1, "epochs": self.cfg["epochs"],
            "step": step_in_epoch, "steps": self.steps_per_epoch,
            "global_step": self.step, "total_steps": self.total_steps,
            "samples_per_s": self.rate, "eta_s": remaining * self.step_s if self.step_s else None,
            "lr": self.opt.param_groups[0]["lr"],
            # GPU memory held by tensors, now and at its peak (webgrad.webgpu's counters: no GPU query)
            "memory": wg.webgpu.memory_allocated(), "peak_memory": wg.webgpu.max_memory_allocated(),
            # GPU time per step from timestamp queries (None, with the reason, where there are none)
            "gpu_ms": self.gpu_timer.ms_per_step, "gpu_timer": self.gpu_timer.unavailable,
            "preparing": self.preparing(),
        }
        if self.rate and self.cfg["dataset"] == "text":
            msg["tokens_per_s"] = self.rate * self.block_size
        if loss is not None:
            msg["loss"] = loss
        self.control.post(msg)

    def _start_counting(self):
        self._loss_sum = wg.zeros((), device=self.device)
        self._pending, self._mark, self._last_post = 0, (self.step, self.clock.now()), 0.0
        self._read_every = READ_EVERY

    async def _count(self, loss, epoch, step_in_epoch, warming, last_of_epoch=False):
        """After a step: add its loss to the running sum, read the mean back when due (every step while the run
        prepares), post progress. Returns a message when the loss is not finite (the good weights are back)."""
        self._loss_sum.add_(loss.detach())
        self._pending += 1
        self.step += 1
        self.calls += 1
        if warming or self._pending >= self._read_every or last_of_epoch:
            mean = await self._loss_sum.item_async() / self._pending
            self._loss_sum.zero_()
            now = self.clock.now()
            if warming:  # the recording's steps are not what the rate should tell
                self._mark = (self.step, now)
            elif self.step > self._mark[0]:
                self.step_s = max(now - self._mark[1], 1e-9) / (self.step - self._mark[0])
                self.rate = self.cfg["batch_size"] / self.step_s
                self._read_every = max(1, min(READ_EVERY, int(MAX_READ_INTERVAL_S / self.step_s)))
                self._mark = (self.step, now)
            self._pending = 0
            if not math.isfinite(mean):
                self.snapshots.restore()
                return (f"the loss became {mean} at step {self.step}{self._where(epoch)}: training stopped and the "
                        "last weights with a finite loss were put back; try a smaller learning rate")
            self.snapshots.confirm()
            self.gpu_timer.mark(self.step)
            if warming:
                self.gpu_timer.rebase(self.step)  # the recording's GPU time is not a step's either
            self._progress(epoch, step_in_epoch, mean)
            self._last_post = now
        elif self.clock.now() - self._last_post > PROGRESS_EVERY_S:
            self._progress(epoch, step_in_epoch)
            self._last_post = self.clock.now()
        return None

    def _where(self, epoch):
        return f" (epoch {epoch + 1})"

    async def run(self):
        """Train; returns ("done" | "stopped" | "diverged", message)."""
        cfg = self.cfg
        self._start_counting()
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
                warming = self.preparing()
                loss = self.train_step(x, y)
                if self.sched is not None and self.sched_per_step:
                    self.sched.step()
                diverged = await self._count(loss, epoch, s + 1, warming, s == self.steps_per_epoch - 1)
                if diverged:
                    return "diverged", diverged
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


GRAD_CLIP = 1.0  # a GPT's gradients are clipped to this norm (nanoGPT's default): early spikes of the loss stay low


def gpt_step(model, opt, amp=None):
    """A GPT's training step, step(idx, targets) -> loss: nanoGPT's, with the gradients clipped to GRAD_CLIP
    (webgrad.models.train_step's, plus the clip); replayed, or with amp (a device type) eager under autocast with a
    GradScaler (the step's .scaler), which unscales the gradients before the clip."""
    params = [p for p in model.parameters() if p.requires_grad]
    scaler = None
    if amp:
        from webgrad.amp import GradScaler
        scaler = GradScaler(amp)

    def step(idx, targets):
        if scaler is None:
            _, loss = model(idx, targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            wg.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
            opt.step()
            return loss
        with wg.autocast(device_type=amp, dtype=wg.float16):
            _, loss = model(idx, targets)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        wg.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
        scaler.step(opt)
        scaler.update()
        return loss

    step.__name__ = step.__qualname__ = "gpt_step"
    if scaler is None:
        return wg.replayable(step)
    step.scaler = scaler
    return step


class TextRun(Run):
    """A GPT trained on the Text dataset: `steps` steps on random windows of the text (one epoch, in the
    checkpoints' terms), and every `sample_every` steps the validation loss, a sample of generated text (both
    sent to the page through control.report_text), the weights' host copy and a checkpoint."""

    def _setup(self, cfg, data, device):
        self.data = data
        self.model = models.build(self.kind, device, None, len(data.vocab))
        self.block_size = self.model.config.block_size
        self.steps_per_epoch = self.total_steps = cfg["steps"]
        self.sample_every = min(cfg["sample_every"], cfg["steps"])
        self.train_step = gpt_step(self.model, self.opt_for_step(), "webgpu" if cfg["amp"] else None)

    def _where(self, epoch):
        return ""

    async def run(self):
        B = self.cfg["batch_size"]
        saved = getattr(self, "resume_rng", None)  # a resumed run draws its windows from where it was
        self.resume_rng = None
        if saved is not None:
            wg.set_rng_state(tuple(saved["now"]))
        self._start_counting()
        self.clock.start()
        self.model.train()
        while self.step < self.total_steps:
            self.clock.stop()
            if await self.control.checkpoint() == "stop":
                return "stopped", f"stopped after {self.step} of {self.total_steps} steps"
            self.clock.start()
            x, y = self.data.batch("train", B, self.block_size)
            warming = self.preparing()
            loss = self.train_step(x, y)
            if self.sched is not None and self.sched_per_step:
                self.sched.step()
            end = self.step + 1 == self.total_steps or (self.step + 1) % self.sample_every == 0
            diverged = await self._count(loss, 0, self.step + 1, warming, end)
            if diverged:
                return "diverged", diverged
            if end:
                self.clock.stop()
                if self.step == self.total_steps:
                    self.epoch = 1
                await self.control.report_text(self)  # the validation loss and a sample
                self.gpu_timer.rebase(self.step)
                self.control.keep_weights(f"step {self.step}")
                await self.control.checkpoints.save(self, "sample")
                if self.sched is not None and not self.sched_per_step:
                    self.sched.step()  # StepLR: x0.7 at every sample
                self.clock.start()
        self.clock.stop()
        return "done", f"trained {self.step} steps in {self.clock.elapsed:.1f} s"
