"""A whole PyTorch training step on webgpu tensors, recorded once and replayed: no Python, no dispatch.

    step = webgrad.torch_device.replayable(train_step)   # train_step(x, y): zero_grad, forward, backward, step
    for x, y in loader:
        loss = step(x.to("webgpu"), y.to("webgpu"))       # after a warm-up call and a recording: one replay
        if i % 100 == 0:
            print(loss.item())                           # read outside the step

The step may be eager PyTorch or ``torch.compile(..., backend="webgrad")`` (its graphs run node by node while
the step is recorded). This is webgrad.replayable for torch functions: the first call runs as it is (it
compiles and makes the optimizer's state), the second records every kernel the step issues on the GPU (eager
ops, compiled graphs, the optimizer's foreach updates) and later calls copy the new arguments into the
recording's inputs and replay it. The rules are CUDA graphs' (torch.cuda.graphs): shapes stay as recorded (a
call with other shapes runs eagerly), nothing in the step reads values back (no ``.item()``; a step that did
is run eagerly from then on, with a warning), host-side decisions are frozen as recorded: zero the gradients
inside the step, and give Adam ``capturable=True`` (its step count and bias corrections then live on the
device; the default keeps them on the host, which a replay would not advance). The tensors returned are the
same memory at every replay, as with CUDA graphs: copy what must outlive the next step.

A call in which torch.compile compiled (Dynamo's first run of a frame, or a recompile: an optimizer's first step
makes its state, and the next call's guards differ) counts as warm-up: Dynamo prints tensors while building its
guards (PyTorch 2.11 takes repr() of every parameter it guards on), which reads them back, and a recording on
such a call would be refused. The step records again on the next call, up to RECOMPILES_ALLOWED times.
"""

import sys
import warnings

import torch
import torch.utils._pytree as pytree

import webgrad as wg

from . import storage as st


RECOMPILES_ALLOWED = 4  # recordings retried because torch.compile compiled during them (see the module doc)


def _compilations():
    """How many times Dynamo has compiled in this process: frames it converted (each builds guards, whether or
    not its graph is new: PyTorch 2.11 recompiled ResNet-18's step on its recording call into a graph it already
    had, and read the parameters back while guarding on them) plus graphs made (0 where torch._dynamo was never
    imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return 0 if utils is None else utils.counters["frames"]["total"] + utils.counters["stats"]["unique_graphs"]


class Replayable:
    """The callable :func:`replayable` returns; ``.replays`` counts replays, ``.inner`` is the webgrad side."""

    def __init__(self, fn, warmup=1):
        self.fn = fn
        self.inner = wg.replayable(self._run, warmup=warmup)
        self._arg_dtypes = None
        self._out = None  # (pytree spec, per leaf: torch dtype or None for a non-tensor)
        self.recompiles = 0  # recordings retried because the call compiled

    @property
    def replays(self):
        return self.inner.replays

    def _run(self, *args):
        """fn on torch tensors viewing the webgrad arguments; its tensor outputs as webgrad tensors."""
        targs = [st.wrap(a, d) if isinstance(a, wg.Tensor) else a for a, d in zip(args, self._arg_dtypes)]
        out = self.fn(*targs)
        leaves, spec = pytree.tree_flatten(out)
        dtypes = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and leaf.device.type != st.DEVICE.type:
                raise TypeError(f"replayable: the step returned a tensor on {leaf.device}; a recorded step's "
                                "tensors live on webgpu (move host values out of the step)")
            dtypes.append(leaf.dtype if isinstance(leaf, torch.Tensor) else None)
        self._out = (spec, dtypes)
        return [st.unwrap(leaf.detach()) if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]

    def __call__(self, *args):
        for a in args:
            if isinstance(a, torch.Tensor) and a.device.type != st.DEVICE.type:
                raise TypeError(f"replayable: arguments are webgpu tensors (or Python values), got one on {a.device}")
        self._arg_dtypes = [a.dtype if isinstance(a, torch.Tensor) else None for a in args]
        inner_args = [st.unwrap(a.detach()) if isinstance(a, torch.Tensor) else a for a in args]
        if not self.inner.records_next_call:
            leaves = self.inner(*inner_args)
        else:
            compiled = _compilations()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                leaves = self.inner(*inner_args)
            retry = (self.inner.reads_back and _compilations() != compiled
                     and self.recompiles < RECOMPILES_ALLOWED)
            if retry:  # the reads were the compiler's (see the module doc): record on the next call
                self.recompiles += 1
                self.inner.record_again()
            for w in caught:
                if not (retry and issubclass(w.category, RuntimeWarning) and "read" in str(w.message)):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        spec, dtypes = self._out
        out = [st.wrap(x, d) if d is not None else x for x, d in zip(leaves, dtypes)]
        return pytree.tree_unflatten(out, spec)


def replayable(fn=None, *, warmup=1):
    """Record a training step on webgpu tensors once and replay it (see the module doc). As a decorator too."""
    if fn is None:
        return lambda f: Replayable(f, warmup)
    return Replayable(fn, warmup)
