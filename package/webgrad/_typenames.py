"""PyTorch's legacy tensor type names ('torch.FloatTensor', ...) and the dtypes they stand for: what
Tensor.type() answers and accepts (the typed classes themselves are in _legacy.py)."""

from . import dtypes

# legacy type -> dtype name, in the order type() looks a dtype up (while webgrad.long is int32, an int32
# tensor answers 'torch.LongTensor', the name a PyTorch script expects of tensor([1, 2]).type())
TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "LongTensor": "int64",
         "IntTensor": "int32", "ByteTensor": "uint8", "BoolTensor": "bool"}
# names type() answers and accepts that have no legacy class in webgrad (_legacy.py makes one per TYPES entry)
NAMES_ONLY = {"BFloat16Tensor": "bfloat16", "ShortTensor": "int16", "CharTensor": "int8"}


def type_name(dtype):
    """Tensor.type()'s answer: PyTorch's legacy name of `dtype` ('torch.FloatTensor')."""
    for name, dtype_name in (*TYPES.items(), *NAMES_ONLY.items()):
        if dtypes.to_dtype(dtype_name) is dtype:
            return f"torch.{name}"
    return f"torch.{dtype.name}"


def type_dtype(arg):
    """The dtype Tensor.type(arg) converts to: a legacy type (torch.LongTensor), its name ('torch.LongTensor'),
    or anything dtypes.to_dtype takes."""
    if isinstance(arg, type) and arg.__name__ in TYPES and isinstance(getattr(arg, "is_cuda", None), bool):
        return arg.dtype  # a legacy type (the CUDA ones raise, naming the missing device)
    if isinstance(arg, str):
        name = arg.removeprefix("torch.").removeprefix("webgrad.")
        if name.startswith("cuda."):
            raise RuntimeError(f"type({arg!r}): webgrad has no CUDA device (use .to('webgpu'))")
        if name in TYPES or name in NAMES_ONLY:
            return dtypes.to_dtype(TYPES.get(name) or NAMES_ONLY[name])
        try:
            return dtypes.to_dtype(name)
        except TypeError:
            raise ValueError(f"invalid type: {arg!r}") from None
    return dtypes.to_dtype(arg)
