"""Lazy modules, as PyTorch's: layers whose input size (in_features, in_channels, num_features) comes from the
first input. LazyLinear(out_features), LazyConv1d/2d/3d(out_channels, kernel_size, ...), LazyConvTranspose1d/2d/3d,
LazyBatchNorm1d/2d/3d(), LazyInstanceNorm1d/2d/3d().

Until the first forward their parameters and running statistics are UninitializedParameter / UninitializedBuffer
placeholders (nn/parameter.py). The first call runs a forward pre-hook that reads the input's size, materialises
them in place and initialises them with the regular layer's reset_parameters (the same distributions), then turns
the module into that regular class (`cls_to_become`: a LazyLinear is a Linear afterwards, hooks gone).

Usage, as PyTorch's documentation says: build the network, move it (`.to(device)`, `.double()`: remembered by
the placeholders, so the parameters are created there), run one forward on a batch of the right size (a "dry
run", d2l's `net(X)`), then make the optimizer. An optimizer made before the dry run does hold the same parameter
objects (they are materialised in place), but it saw placeholders: make it after the dry run, as PyTorch users do.

state_dict() of an uninitialised module holds the placeholders themselves; load_state_dict() of initialised
values into it materialises its parameters with their shapes first (the module becomes its regular class at its
first forward, which then checks that the input's size agrees); loading placeholders into an initialised module
raises PyTorch's RuntimeError.

One deliberate difference from PyTorch: LazyInstanceNorm reads num_features from the channel dim of an unbatched
input too ([C, L] gives C), where PyTorch reads input.shape[1] and then raises for any affine unbatched input.
"""

import itertools

from .. import dtypes
from .._autograd import no_grad
from .._tensor import tensor
from .conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .layers_more import Conv1d, ConvTranspose1d
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .parameter import UninitializedBuffer, UninitializedParameter, is_lazy

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """A mixin (before the regular layer among the bases) for modules whose parameters' shapes come from the first
    input: a subclass implements initialize_parameters(*input) and names its regular class in cls_to_become."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        """Before load_state_dict copies: give each placeholder the shape of the initialised value it will get."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param) and not is_lazy(state_dict[key]):
                with no_grad():
                    param.materialize(tuple(state_dict[key].shape))

    def initialize_parameters(self, *args, **kwargs):
        """Materialise and initialise the parameters from the first input's size (each lazy layer has its own)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer of this module (not its children) is still a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        """The forward pre-hook of the first call: initialise, then become the regular class."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook
        del module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with `DataParallel`. Run a dummy "
                           "forward pass to correctly initialize the modules")


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is input.shape[-1] of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)  # no bias yet: the placeholders below replace what this would create
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:  # parameters loaded from a state_dict: the input must fit them
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvMixin(LazyModuleMixin):
    """in_channels from the first input's channel dim; weight [out, in / groups, *k] ([in, out / groups, *k]
    transposed)."""

    _spatial_dims = None
    _transposed = False

    def _lazy_setup(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            with no_grad():
                if self._transposed:
                    self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
                else:
                    self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
                if self.bias is not None:
                    self.bias.materialize((self.out_channels,))
                self.reset_parameters()

    def _get_in_channels(self, input):
        unbatched = self._spatial_dims + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]


class _LazyConv(_LazyConvMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    _transposed = True

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode)
        self._lazy_setup(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A Conv1d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 1, Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A Conv2d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 2, Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A Conv3d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 3, Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 1, ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 2, ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is the first input's channel count."""
    _spatial_dims, cls_to_become = 3, ConvTranspose3d


class _LazyNormBase(LazyModuleMixin):
    """num_features from the first input's channel dim; weight, bias, running_mean, running_var as placeholders
    until then (num_batches_tracked is known: 0)."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(0, eps, momentum, False, False, bias=False)  # registers every name, creating nothing
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=dtypes.int32, device=device)  # the regular layers' dtype

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _num_features_of(self, input):
        return input.shape[1]

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            self.num_features = self._num_features_of(input)
            with no_grad():
                for t in (self.weight, self.bias, self.running_mean, self.running_var):
                    if t is not None:
                        t.materialize((self.num_features,))
                self.reset_parameters()


class _LazyInstanceNorm(_LazyNormBase):
    def _num_features_of(self, input):
        return input.shape[0] if input.dim() == self._no_batch_dim else input.shape[1]


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A BatchNorm1d whose num_features is the first input's channel count."""
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A BatchNorm2d whose num_features is the first input's channel count."""
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A BatchNorm3d whose num_features is the first input's channel count."""
    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """An InstanceNorm1d whose num_features is the first input's channel count (affine and running statistics
    on by default, as PyTorch's lazy instance norms)."""
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """An InstanceNorm2d whose num_features is the first input's channel count (affine and running statistics
    on by default, as PyTorch's lazy instance norms)."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """An InstanceNorm3d whose num_features is the first input's channel count (affine and running statistics
    on by default, as PyTorch's lazy instance norms)."""
    cls_to_become = InstanceNorm3d
