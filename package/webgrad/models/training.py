"""One training step, shared by the dashboard, the benchmarks and the examples:

    step = webgrad.models.train_step(model, optimizer)                       # step(x, y) -> loss
    step = webgrad.models.train_step(model, optimizer, replay=True)          # recorded once, then replayed
    step = webgrad.models.train_step(model, optimizer, amp="webgpu")         # autocast float16 + GradScaler
    step = webgrad.models.train_step(model, optimizer, lib=torch)            # the same step in PyTorch

A step is forward, loss, optimizer.zero_grad(), backward, optimizer.step(), in PyTorch's usual order; it
returns the loss (not read back: the caller reads it when it wants to wait for the device).
"""

import webgrad as _webgrad


def train_step(model, optimizer, loss_fn=None, *, amp=None, scaler=None, replay=False, lib=None):
    """step(x, y) -> loss: one training step of `model` on a batch `x` with targets `y`.

    loss_fn   loss_fn(output, y); default: `lib`'s cross_entropy
    amp       a device type ("webgpu", "cuda", "cpu"): the forward pass and the loss under autocast to
              float16 on it, the loss scaled for backward by a GradScaler (`scaler`, else a new
              GradScaler(amp)), which also steps the optimizer and updates its scale. The step's `.scaler`
              is that GradScaler (its state goes into checkpoints).
    scaler    the GradScaler of an `amp` step (default: a new one)
    replay    wrap the step in webgrad.replayable: its GPU work recorded once and replayed (webgrad only)
    lib       the library of `model` and `optimizer`: webgrad (default) or torch (a benchmark's PyTorch side)
    """
    lib = lib or _webgrad
    if replay and lib is not _webgrad:
        raise ValueError(f"train_step(replay=True) records webgrad's GPU work; {lib.__name__}'s step cannot be")
    if amp is not None and not isinstance(amp, str):
        raise TypeError(f"train_step(amp=...) takes a device type such as 'webgpu' or 'cuda', got {amp!r}")
    loss_fn = loss_fn or lib.nn.functional.cross_entropy
    if amp is None and scaler is not None:
        raise ValueError("train_step(scaler=...) scales the loss of a mixed-precision step: pass amp=<device type> too")
    if amp is not None and scaler is None:
        scaler = lib.amp.GradScaler(amp)

    if scaler is None:
        def step(x, y):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss
    else:
        autocast, float16 = lib.autocast, lib.float16

        def step(x, y):
            with autocast(device_type=amp, dtype=float16):
                loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            return loss

    step.__name__ = step.__qualname__ = "train_step"
    if replay:
        step = _webgrad.replayable(step)
    if scaler is not None:
        step.scaler = scaler
    return step
