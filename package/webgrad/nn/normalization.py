"""BatchNorm1d, BatchNorm2d, BatchNorm3d and LayerNorm, with PyTorch's parameter and buffer names so
state_dicts move between the two libraries: weight, bias, running_mean, running_var, num_batches_tracked."""

from .. import dtypes
from .._tensor import empty, ones, tensor, zeros
from . import functional as F, init
from .module import Module
from .parameter import Parameter


class _BatchNorm(Module):
    _expected_dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.int32, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._expected_dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._expected_dims)} input "
                             f"(got {input.ndim}D input of shape {list(input.shape)})")

    def forward(self, input):
        self._check_input_dim(input)
        # num_batches_tracked counts in training; the kernel increments it (no dispatch of its own) and, for
        # momentum=None (a cumulative average), divides by it on the device
        count = self.num_batches_tracked if self.training and self.track_running_stats else None
        # batch statistics in training, and in eval when no running statistics are kept
        use_batch = self.training or self.running_mean is None
        update = not self.training or self.track_running_stats
        return F._batch_norm(input, self.running_mean if update else None, self.running_var if update else None,
                             self.weight, self.bias, use_batch, self.momentum, self.eps, count)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Over [N, C] or [N, C, L] inputs."""
    _expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Over [N, C, H, W] inputs."""
    _expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Over [N, C, D, H, W] inputs."""
    _expected_dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics PyTorch averages over the processes of a distributed group. In webgrad's
    world of one process (webgrad.distributed) that average is the batch's own, so it is the batch norm of
    any input of 2 or more dims, as PyTorch's SyncBatchNorm is where no world of several processes runs."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm1d/2d/3d in it replaced by a SyncBatchNorm that shares its parameters
        and running statistics (a new module where `module` itself is one), as PyTorch's."""
        converted = module
        if type(module) in (BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm):  # not the instance norms
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group, bias=module.bias is not None)
            if module.affine:
                converted.weight = module.weight
                converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
