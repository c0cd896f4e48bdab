"""What a checkpoint of the dashboard's training run holds, and its file format.

A checkpoint is one safetensors file (it opens in any safetensors reader):
- the tensors: the model's state_dict under "model/<name>", the optimizer's state tensors (momentum and
  Adam buffers) under "optimizer/state/<index>/<name>", any other tensor under its path;
- the header's metadata, strings only, as the format wants:
    format   "webgrad-checkpoint"        version   "1"
    state    JSON of everything that is not a tensor: the run's settings (model, dataset, optimizer ...),
             the optimizer's param_groups and step counts, the LR scheduler, the progress (epoch, step),
             the learning curves shown on the charts, the random generator's state; tensors appear in it as
             {"$t": name}
    summary  JSON the page shows before Python has read the rest (model, dataset, epoch, step, when)
    sha256   of every other metadata entry and of the tensor data: a bit flipped anywhere is detected.
Nothing in the format knows about MNIST, the MLP or Adam: `pack` stores any nested state of dicts, lists,
tuples, numbers, strings and tensors, so it keeps working for every model and optimizer the page trains.

`unpack` checks the whole file (structure, format, version, digest, JSON, and the form of every entry a
training run reads) before it creates any tensor and raises CheckpointError with a message for the user,
whatever the file holds; `peek` does the checks without creating tensors.

`capture(run, ...)` takes a train.Run's state between two steps; `restore(run, state)` puts it into a
freshly built Run of the same settings; `batches(run, epoch)` is the run's loop over one epoch, which
continues a restored epoch where it stopped, with the same order of samples.
"""

import hashlib
import io
import json
import math
import time

import webgrad as wg
from webgrad.io import safetensors

FORMAT = "webgrad-checkpoint"
VERSION = 1
MAX_DEPTH = 64  # of the JSON entries: a run's state nests 6 levels (optimizer/state/0/exp_avg/$t)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: the message says why, in words for the page."""


# ===================================================================== the file format
def pack(state, summary):
    """The bytes of a checkpoint holding `state` (nested dicts/lists/tuples of numbers, strings, None,
    bools and tensors) and `summary` (a JSON-able dict for the page)."""
    tensors = {}
    meta = {
        "format": FORMAT, "version": str(VERSION),
        "state": json.dumps(_encode(state, "", tensors), separators=(",", ":"), allow_nan=False),
        "summary": json.dumps(summary, separators=(",", ":"), allow_nan=False),
    }
    buf = io.BytesIO()
    try:
        wg.save(tensors, buf, metadata=meta)
    except KeyError as e:  # safetensors has no name for the dtype
        raise CheckpointError(f"cannot store a tensor of dtype {e} in a checkpoint") from None
    raw = buf.getvalue()
    # The digest goes into the header after the fact: the header is rewritten with one more metadata entry,
    # and the tensor data (whose offsets count from the header's end) is appended unchanged.
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    header["__metadata__"]["sha256"] = _digest(meta, data)
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


def peek(data):
    """(summary, metadata) of a checkpoint after checking all of it; creates no tensor."""
    return _check(data)[1:]


RUN_KEYS = ("config", "model", "optimizer", "progress")  # what the state of a training run must hold


def unpack(data, device=None, required=()):
    """(state, summary) of a checkpoint, its tensors on `device`; CheckpointError if it cannot be used
    (or if its state lacks one of the `required` keys)."""
    raw, summary, meta = _check(data)
    tree = _json(meta, "state")
    try:
        tensors = safetensors.load(io.BytesIO(raw), device=device)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"the checkpoint's tensors cannot be loaded: {e}") from None
    state = _decode(tree, tensors, 0)
    for key in required:
        if not isinstance(state, dict) or key not in state:
            raise CheckpointError(f"the checkpoint has no {key!r} entry: it was not written by this page")
    if isinstance(state, dict) and set(RUN_KEYS) <= set(required):
        _check_run(state)
    return state, summary


def _json(meta, key):
    """The JSON of a metadata entry, its nesting checked first (json.loads recurses once per level)."""
    text = meta.get(key)
    if not isinstance(text, str):
        raise CheckpointError(f"the checkpoint's {key} is missing")
    depth = safetensors.json_depth(text.encode("utf-8", "surrogatepass"))
    if depth > MAX_DEPTH:
        raise CheckpointError(f"the checkpoint's {key} nests {depth} levels deep (at most {MAX_DEPTH})")
    try:
        return json.loads(text)
    except ValueError as e:
        raise CheckpointError(f"the checkpoint's {key} is not valid JSON ({e})") from None


def _is_int(v):
    return type(v) is int


def _is_number(v):
    return type(v) in (int, float)


def _check_run(state):
    """The entries a training run reads (restore(), batches(), the page's charts) have the form it needs."""
    def need(ok, what):
        if not ok:
            raise CheckpointError(f"the checkpoint's {what} is not what this page writes (a damaged or foreign file)")

    for key in ("config", "model", "optimizer", "progress"):
        need(isinstance(state[key], dict), key)
    progress = state["progress"]
    need(all(_is_int(progress.get(k)) for k in ("step", "epochs_done", "steps_per_epoch", "total_steps"))
         and _is_number(progress.get("elapsed_s", 0.0)), "progress")
    for key in ("scheduler", "scaler"):
        need(state.get(key) is None or isinstance(state[key], dict), key)
    history = state.get("history")
    need(history is None or (isinstance(history, dict) and all(
        isinstance(history.get(k, []), list) and all(isinstance(p, list) and len(p) == 2 and
                                                      all(_is_number(x) for x in p) for p in history.get(k, []))
        for k in ("loss", "accuracy", "val_loss"))), "history")
    sample = state.get("sample")  # a GPT's last sample of text, shown again when the run resumes
    need(sample is None or (isinstance(sample, dict) and _is_int(sample.get("step")) and
                            isinstance(sample.get("prompt"), str) and isinstance(sample.get("text"), str) and
                            _is_number(sample.get("temperature")) and _is_int(sample.get("top_k"))), "sample")
    data = state.get("data")  # what the run trained on (Data.info / TextData.info): names, a digest, counts
    need(data is None or (isinstance(data, dict) and all(
        isinstance(k, str) and (isinstance(v, str) or _is_int(v)) for k, v in data.items())), "data")
    rng = state.get("rng")

    def generator(v):
        return isinstance(v, list) and len(v) == 2 and all(_is_int(x) and x >= 0 for x in v)

    need(rng is None or (isinstance(rng, dict) and generator(rng.get("now")) and (
        rng.get("epoch") is None or (isinstance(rng["epoch"], list) and len(rng["epoch"]) == 2 and
                                     _is_int(rng["epoch"][0]) and generator(rng["epoch"][1])))), "rng")


def _check(data):
    raw = bytes(data)
    try:
        _, meta = safetensors.parse(raw)
    except ValueError as e:
        raise CheckpointError(f"the checkpoint file is damaged ({len(raw)} bytes): {e}") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"this file is not a webgrad checkpoint (its format is {meta.get('format')!r})")
    version = meta.get("version", "")
    if version != str(VERSION):
        newer = version.isdigit() and int(version) > VERSION
        raise CheckpointError(f"the checkpoint has format version {version!r}, and this page reads version {VERSION}"
                              f"{': it was written by a newer webgrad' if newer else ''}")
    n = int.from_bytes(raw[:8], "little")
    given = meta.pop("sha256", None)
    if given != _digest(meta, memoryview(raw)[8 + n:]):
        raise CheckpointError("the checkpoint is damaged: its contents do not match the checksum written with it "
                              "(a write that did not finish, or a changed file)")
    summary = _json(meta, "summary")
    if not isinstance(summary, dict):
        raise CheckpointError("the checkpoint's summary is not an object")
    return raw, summary, meta


def _digest(meta, data):
    h = hashlib.sha256()
    for key in sorted(meta):
        h.update(key.encode("utf-8") + b"\0" + meta[key].encode("utf-8") + b"\0")
    h.update(data)
    return h.hexdigest()


# JSON holds dicts with string keys, lists, strings, finite numbers, booleans and null. The rest is tagged:
#   {"$t": name}        a tensor, stored in the file under `name`
#   {"$tuple": [...]}   a tuple (Adam's betas)
#   {"$items": [[k, v], ...]}   a dict whose keys are not all strings (the optimizer's state by index), or
#                       whose keys start with "$" (so that no tag is ever read from a plain dict)
#   {"$float": "nan" | "inf" | "-inf"}
def _encode(value, path, tensors):
    if isinstance(value, wg.Tensor):
        name = path.strip("/") or "tensor"
        while name in tensors:  # {0: ..., "0": ...} would give two tensors one path
            name += "'"
        tensors[name] = value.detach()
        return {"$t": name}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": str(value)}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{path}/{i}", tensors) for i, v in enumerate(value)]
        return {"$tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _encode(v, f"{path}/{k}", tensors) for k, v in value.items()}
        for k in value:
            if not (k is None or isinstance(k, (bool, int, float, str))):
                raise CheckpointError(f"cannot store {path or 'the state'}: a key of type {type(k).__name__}")
        return {"$items": [[k, _encode(v, f"{path}/{k}", tensors)] for k, v in value.items()]}
    raise CheckpointError(f"cannot store {path or 'the state'} in a checkpoint: a {type(value).__name__} "
                          "(checkpoints hold numbers, strings, lists, dicts and tensors)")


def _decode(value, tensors, depth):
    if depth > MAX_DEPTH:
        raise CheckpointError(f"the checkpoint's state nests more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        return [_decode(v, tensors, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (tag, inner), = value.items()
        if tag == "$t":
            if not isinstance(inner, str) or inner not in tensors:
                raise CheckpointError(f"the checkpoint's state names a tensor {str(inner)[:60]!r} that the file does "
                                      "not hold")
            return tensors[inner]
        if tag == "$tuple" and isinstance(inner, list):
            return tuple(_decode(v, tensors, depth + 1) for v in inner)
        if tag == "$items" and isinstance(inner, list) and all(
                isinstance(p, list) and len(p) == 2 and (p[0] is None or type(p[0]) in (bool, int, float, str))
                for p in inner):
            return {k: _decode(v, tensors, depth + 1) for k, v in inner}
        if tag == "$float" and inner in ("nan", "inf", "-inf"):
            return float(inner)
    if any(k.startswith("$") for k in value):
        raise CheckpointError(f"the checkpoint's state has an unknown or malformed entry {str(sorted(value))[:80]}")
    return {k: _decode(v, tensors, depth + 1) for k, v in value.items()}


# ===================================================================== a training run's checkpoint
def position(run):
    """(epoch, step within it) where `run` goes on: between steps every finished epoch had all its steps."""
    return run.step // run.steps_per_epoch, run.step % run.steps_per_epoch


def capture(run, history, reason, names=None):
    """(state, summary) of a train.Run between two steps. history: the charts' curves
    {"loss": [[global step, loss], ...], "accuracy": [[epoch, accuracy], ...]} (a GPT's run: "val_loss":
    [[global step, loss], ...]); reason: "pause" | "epoch" | "sample" (a GPT's, every sample_every steps);
    names: {"model": ..., "dataset": ...} as the page shows them."""
    epoch, step = position(run)
    cfg = run.cfg
    state = {
        "config": dict(cfg),
        "model": run.model.state_dict(),
        "optimizer": run.opt.state_dict(),
        "scheduler": run.sched.state_dict() if run.sched is not None else None,
        "scaler": run.train_step.scaler.state_dict() if hasattr(run.train_step, "scaler") else None,
        "progress": {"step": run.step, "epochs_done": run.epoch, "steps_per_epoch": run.steps_per_epoch,
                     "total_steps": run.total_steps, "elapsed_s": run.clock.now()},
        # The generator now, and where the current epoch drew its order of samples (see batches()).
        "rng": {"now": list(wg.get_rng_state()), "epoch": getattr(run, "epoch_rng", None)},
        "history": history,
        "data": getattr(run, "data_info", None),
    }
    names = names or {}
    loss = history["loss"][-1][1] if history.get("loss") else None
    accuracy = history["accuracy"][-1][1] if history.get("accuracy") else None
    val_loss = history["val_loss"][-1][1] if history.get("val_loss") else None
    summary = {
        "model": names.get("model", cfg.get("model")), "dataset": names.get("dataset", cfg.get("dataset", "mnist")),
        "epoch": min(epoch + 1, cfg["epochs"]), "epochs": cfg["epochs"], "step_in_epoch": step,
        "steps_per_epoch": run.steps_per_epoch, "step": run.step, "total_steps": run.total_steps,
        "epochs_done": run.epoch, "reason": reason, "saved_at": time.time(),
        "loss": loss if loss is None or math.isfinite(loss) else None, "accuracy": accuracy,
        "val_loss": val_loss if val_loss is None or math.isfinite(val_loss) else None,
        "config": dict(cfg), "data": getattr(run, "data_info", None),
    }
    return state, summary


def restore(run, state):
    """Put a checkpoint's state into `run`, a train.Run freshly built from the same settings (state["config"]).
    Everything is checked before the run is changed; CheckpointError says what does not fit."""
    progress = state["progress"]
    if progress.get("steps_per_epoch") != run.steps_per_epoch or progress.get("total_steps") != run.total_steps:
        raise CheckpointError(f"the checkpoint's run had {progress.get('steps_per_epoch')} steps per epoch and "
                              f"{progress.get('total_steps')} in all, this one {run.steps_per_epoch} and "
                              f"{run.total_steps}: the data or the settings differ")
    step = progress["step"]
    if not 0 <= step <= run.total_steps or progress["epochs_done"] != step // run.steps_per_epoch:
        raise CheckpointError(f"the checkpoint's progress is inconsistent (step {progress['step']}, "
                              f"{progress['epochs_done']} epochs done)")
    try:
        run.model.load_state_dict(state["model"])  # checks every name and shape before it copies
        run.opt.load_state_dict(state["optimizer"])
        if (run.sched is None) != (state.get("scheduler") is None):
            raise ValueError("the learning-rate schedule differs")
        if run.sched is not None:
            run.sched.load_state_dict(state["scheduler"])
        if hasattr(run.train_step, "scaler") and state.get("scaler") is not None:  # mixed precision's loss scale
            run.train_step.scaler.load_state_dict(state["scaler"])
    except (ValueError, RuntimeError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise CheckpointError(f"the checkpoint does not fit the {run.cfg.get('model')} model and its optimizer: "
                              f"{e}") from None
    run.step, run.epoch = progress["step"], progress["epochs_done"]
    run.clock.elapsed = float(progress.get("elapsed_s", 0.0))
    run.resume_rng = state.get("rng")
    # the NaN guard's copies of the weights: of the restored ones, not of the fresh model's
    run.snapshots = type(run.snapshots)(run.model.parameters())


def batches(run, epoch):
    """(step in epoch, batch) over one epoch of run.loader. The epoch's order of samples is drawn from the
    default generator when the loader starts: its state then is kept (run.epoch_rng), so a checkpoint
    taken mid-epoch can draw the same order again, skip the batches already trained on, and set the
    generator back to where it was at the checkpoint."""
    saved = getattr(run, "resume_rng", None)
    run.resume_rng = None
    skip = run.step - epoch * run.steps_per_epoch
    if saved is not None and skip > 0 and saved.get("epoch") and saved["epoch"][0] == epoch:
        wg.set_rng_state(tuple(saved["epoch"][1]))
    elif saved is not None:
        wg.set_rng_state(tuple(saved["now"]))
    run.epoch_rng = [epoch, list(wg.get_rng_state())]
    loader = iter(run.loader)
    for _ in range(max(skip, 0)):
        next(loader)  # the order is drawn at the first batch; skipped batches are gathered, not trained on
    if saved is not None and skip > 0:
        wg.set_rng_state(tuple(saved["now"]))
    for s, batch in enumerate(loader, start=max(skip, 0)):
        yield s, batch
