"""torch.ops: operators by namespace, as ``torch.ops.<namespace>.<name>.<overload>(...)``.

- ``torch.ops.aten.<name>``: PyTorch's ATen operators, answered by webgrad's public functions of the same name
  (``torch.<name>``, ``torch.nn.functional.<name>``, else the Tensor method), plus the few ATen names whose
  arguments differ from those functions' (ATEN_ONLY). Every overload (``.default``, ``.Tensor``, ``.Scalar``,
  ``.dim_IntList`` ...) calls the same function: webgrad's functions take all the argument forms the overloads
  name. A name webgrad has no function for raises AttributeError, as torch does for a name ATen lacks.
- ``torch.ops.<namespace>.<name>``: the Python custom operators ``torch.library`` defines (webgrad/library.py).
- ``torch.ops.load_library(path)``: refused; webgrad runs no compiled operator libraries.

webgrad.ops is also the package of webgrad's own op families; ops/__init__.py hands only the names above to
this module, so its submodules stay what they are.
"""

import builtins

_custom = {}  # namespace -> OpNamespace, made by torch.library


class OpOverload:
    """One overload of an operator: calling it runs the operator."""

    def __init__(self, packet, overload):
        self.overloadpacket, self._overloadname = packet, overload

    def __call__(self, *args, **kwargs):
        return self.overloadpacket._fn(*args, **kwargs)

    def name(self):
        return f"{self.overloadpacket._namespace}::{self.overloadpacket.__name__}" + (
            "" if self._overloadname == "default" else f".{self._overloadname}")

    @property
    def op(self):
        return self.overloadpacket._fn

    def __repr__(self):
        return f"<OpOverload(op='{self.overloadpacket._qualified}', overload='{self._overloadname}')>"


class OpOverloadPacket:
    """An operator with all its overloads; calling the packet calls the default overload."""

    def __init__(self, namespace, name, fn, overloads=("default",)):
        self._namespace, self.__name__, self._fn = namespace, name, fn
        self._qualified, self._overload_names = f"{namespace}.{name}", tuple(overloads)

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        return OpOverload(self, overload)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def overloads(self):
        return list(self._overload_names)

    def __repr__(self):
        return f"<OpOverloadPacket(op='{self._qualified}')>"


class OpNamespace:
    """torch.ops.<namespace>: its operators as attributes."""

    def __init__(self, name):
        self.name, self._ops = name, {}

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        packet = self._ops.get(op)
        if packet is None:
            packet = self._resolve(op)
        return packet

    def _resolve(self, op):
        raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}'")

    def __repr__(self):
        return f"<OpNamespace '{self.name}'>"


def _aten_to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
                  memory_format=None):
    return x.to(device=device, dtype=dtype, copy=True)


def _aten_softmax(x, dim, half_to_float=False):
    from ..nn import functional as F
    return F.softmax(x, dim)


def _aten_log_softmax(x, dim, half_to_float=False):
    from ..nn import functional as F
    return F.log_softmax(x, dim)


def _aten_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    from ..nn import functional as F
    return F.embedding(indices, weight, padding_idx=None if padding_idx < 0 else padding_idx)


def _aten_convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    from ..nn import functional as F
    dims = weight.ndim - 2
    if transposed:
        conv = getattr(F, f"conv_transpose{dims}d")
        return conv(x, weight, bias, stride, padding, output_padding, groups, dilation)
    return getattr(F, f"conv{dims}d")(x, weight, bias, stride, padding, dilation, groups)


def _aten_index(x, indices):
    return x[tuple(indices)]


def _aten_index_put(x, indices, values, accumulate=False):
    return x.index_put(tuple(indices), values, accumulate)


def _aten_index_put_(x, indices, values, accumulate=False):
    return x.index_put_(tuple(indices), values, accumulate)


def _aten_copy_(dst, src, non_blocking=False):
    return dst.copy_(src)


def _aten_slice(x, dim=0, start=None, end=None, step=1):
    index = [builtins.slice(None)] * x.ndim
    index[dim] = builtins.slice(start, end, step)
    return x[tuple(index)]


def _aten_full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    from .. import full
    return full(size, fill_value, dtype=dtype, device=device)


def _aten_unsafe_view(x, size):
    return x.reshape(size)


# ATen names whose arguments are not those of webgrad's (torch's) public function of that name
ATEN_ONLY = {
    "_to_copy": _aten_to_copy, "_softmax": _aten_softmax, "_log_softmax": _aten_log_softmax,
    "embedding": _aten_embedding, "convolution": _aten_convolution, "index": _aten_index,
    "index_put": _aten_index_put, "index_put_": _aten_index_put_, "copy_": _aten_copy_, "slice": _aten_slice,
    "full": _aten_full, "_unsafe_view": _aten_unsafe_view,
}


def _nn_native(name):
    """An ATen operator composed in webgrad/_nn_native.py, imported on first call (it needs nn.functional)."""
    def call(*args, **kwargs):
        from .. import _nn_native
        return _nn_native.ATEN_ONLY[name](*args, **kwargs)
    call.__name__ = name
    return call


ATEN_ONLY.update((name, _nn_native(name)) for name in (
    "_batch_norm_with_update", "native_dropout_backward", "max_pool2d_with_indices_backward",
    "_native_batch_norm_legit", "_softmax_backward_data", "_chunk_cat", "_safe_softmax"))


class AtenNamespace(OpNamespace):
    def _resolve(self, op):
        fn = ATEN_ONLY.get(op)
        if fn is None:
            import webgrad
            from ..nn import functional as F
            fn = (getattr(webgrad, op, None) if not op.startswith("_") else None) or getattr(F, op, None)
            if not callable(fn) or isinstance(fn, type):
                method = getattr(webgrad.Tensor, op, None)
                if not callable(method):
                    raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{op}' (webgrad has no "
                                         f"function or Tensor method {op})")
                fn = method
        packet = self._ops[op] = OpOverloadPacket("aten", op, fn)
        return packet


aten = AtenNamespace("aten")


def namespace(name, create=False):
    """The custom namespace `name` (torch.library makes it on first use), or AttributeError."""
    ns = _custom.get(name)
    if ns is None:
        if not create:
            raise AttributeError(f"torch.ops has no namespace {name!r}: no torch.library operator defines it")
        ns = _custom[name] = OpNamespace(name)
    return ns


def load_library(path):
    """torch.ops.load_library: refused. Compiled (C++/CUDA) operator libraries need PyTorch's dispatcher; webgrad
    runs Python operators only (torch.library.custom_op)."""
    raise OSError(f"torch.ops.load_library({path!r}): webgrad cannot load compiled operator libraries; define the "
                  f"operator in Python with torch.library.custom_op instead")
