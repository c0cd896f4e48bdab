"""torch.nn.parallel: the wrappers scripts put around a model to train it on several GPUs, on one device.

webgrad trains on one device in one process, so both wrappers run the module they wrap, unchanged, and
hold it as `.module` (state_dict keys start with "module.", as PyTorch's do):

- DataParallel splits a batch over CUDA devices in PyTorch; here there is one device, and PyTorch itself
  just runs the module when it has no CUDA device.
- DistributedDataParallel averages gradients over the processes of the default process group; it needs
  init_process_group (as in PyTorch), and in webgrad's world of one process (webgrad.distributed) the
  average over one process is the gradient itself.
"""

import contextlib

from ... import distributed
from ..module import Module


class DataParallel(Module):
    """DataParallel(module, device_ids=None, output_device=None, dim=0): runs `module` on its device."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """module(*inputs, **module_kwargs) on its device, as torch.nn.parallel.data_parallel without CUDA."""
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DistributedDataParallel(Module):
    """DistributedDataParallel(module, ...): gradient averaging over the default process group's processes,
    here a world of one (see the module doc). The keyword arguments are accepted as PyTorch's; no_sync(),
    join() and require_backward_grad_sync behave as in a one-process run."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
                 skip_all_reduce_unused_params=False):
        super().__init__()
        if process_group is None and not distributed.is_initialized():
            raise ValueError("DistributedDataParallel: " + distributed._NOT_INITIALIZED)
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        self.module = module
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.process_group = process_group or distributed.group.WORLD
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate without being averaged inside the block (over one process: no difference)."""
        saved, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = saved

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """Uneven inputs across processes cannot happen in a world of one."""
        yield

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("DistributedDataParallel.register_comm_hook: webgrad's world of one process has "
                                  "no gradient communication to hook")

    def _set_static_graph(self):
        self.static_graph = True
