"""Data-parallel training on webgpu tensors: PyTorch's DistributedDataParallel, gradients reduced through gloo.

    import webgrad.torch_device.distributed as wdist
    dist.init_process_group("webgrad", ...)               # gloo for CPU tensors, staged copies for webgpu ones
    model = Net().to("webgpu")                            # one process per GPU; LOCAL_RANK picks its adapter
    ddp = wdist.DistributedDataParallel(model)
    ... ddp(x).sum().backward(); opt.step()               # gradients averaged across the ranks

gloo moves CPU tensors only, and the GPUs here are reached through WebGPU, which shares no memory with other
processes, so each gradient bucket crosses the host: DDP's reducer hands a bucket (a flat webgpu tensor of
gradients) to the communication hook :func:`allreduce_hook` as soon as the backward has produced it; the hook
reads it back (waiting for the GPU work that produced it), starts gloo's all-reduce on the CPU copy and
returns at once, so the reduction of bucket k runs on gloo's threads while the backward of the layers before
it is computed and the next buckets are read. When the backward ends, DDP waits for the reductions and copies
the averaged gradients into the parameters' ``.grad`` on the device (one upload per parameter).

The process group backend "webgrad" (:class:`ProcessGroupWebgpu`, registered with torch.distributed on import)
is gloo for CPU tensors and gloo through host copies for webgpu tensors (read back, collective, written back,
synchronously): what DDP's own collectives need (the initial broadcast of rank 0's parameters and buffers,
the check of their shapes, the rebuilding of its buckets), and any dist.all_reduce(t) of a webgpu tensor.
:func:`DistributedDataParallel` builds DDP for a webgpu module with the hook registered and buffers broadcast
at construction only (``broadcast_buffers=False``: a broadcast at every forward would be a read-back each step;
BatchNorm statistics then stay per rank).
"""

import time

import torch
import torch.distributed as dist

from . import storage as st


class Timings:
    """Seconds spent per step in the hook's read-backs and waiting for gloo (bench ddp reads them)."""

    def __init__(self):
        self.read = 0.0
        self.reduce = 0.0
        self.buckets = 0

    def reset(self):
        self.read = self.reduce = 0.0
        self.buckets = 0


TIMINGS = Timings()


def allreduce_hook(group, bucket):
    """DDP communication hook for webgpu gradients: the bucket read back, averaged over the ranks by gloo
    asynchronously; the future's value is the CPU result, which DDP copies into the device gradients."""
    start = time.perf_counter()
    host = st.to_cpu(bucket.buffer())
    TIMINGS.read += time.perf_counter() - start
    TIMINGS.buckets += 1
    group = group if group is not None else dist.group.WORLD
    host.div_(dist.get_world_size(group))
    work = dist.all_reduce(host, group=group, async_op=True)

    def done(fut):
        return host
    return work.get_future().then(done)


class ProcessGroupWebgpu(dist.ProcessGroup):
    """The "webgrad" process group: a gloo group for CPU tensors, and for webgpu tensors gloo on host copies,
    read back before and written back after each collective (see the module doc)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    @staticmethod
    def create(store, rank, size, timeout):
        return ProcessGroupWebgpu(store, rank, size, timeout)

    def getBackendName(self):
        return "webgrad"

    def _staged(self, tensors, run):
        """Run gloo collective `run` on host copies of the webgpu tensors among `tensors` (a flat list, CPU
        tensors as they are), then write the results back."""
        host = [st.to_cpu(t) if t.device.type == st.DEVICE.type else t for t in tensors]
        run(host).wait()
        with torch.no_grad():
            for t, h in zip(tensors, host):
                if h is not t:
                    t.copy_(h)
        return _done(tensors)

    def allreduce(self, tensors, opts):
        if all(t.device.type == "cpu" for t in tensors):
            return self.gloo.allreduce(tensors, opts)
        return self._staged(tensors, lambda host: self.gloo.allreduce(host, opts))

    def broadcast(self, tensors, opts):
        if all(t.device.type == "cpu" for t in tensors):
            return self.gloo.broadcast(tensors, opts)
        return self._staged(tensors, lambda host: self.gloo.broadcast(host, opts))

    def allgather(self, output_tensors, input_tensors, opts):
        flat = [t for ts in output_tensors for t in ts]
        if all(t.device.type == "cpu" for t in flat + list(input_tensors)):
            return self.gloo.allgather(output_tensors, input_tensors, opts)
        inputs = [st.to_cpu(t) if t.device.type == st.DEVICE.type else t for t in input_tensors]
        outputs = [[torch.empty(t.shape, dtype=t.dtype) for t in ts] for ts in output_tensors]
        self.gloo.allgather(outputs, inputs, opts).wait()
        with torch.no_grad():
            for ts, hs in zip(output_tensors, outputs):
                for t, h in zip(ts, hs):
                    t.copy_(h)
        return _done(output_tensors)

    def barrier(self, opts):
        return self.gloo.barrier(opts)


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(fut)


if "WEBGRAD" not in dist.Backend._plugins:
    dist.Backend.register_backend("webgrad", ProcessGroupWebgpu.create, devices=["cpu", st.DEVICE.type])


def DistributedDataParallel(module, process_group=None, **kwargs):
    """``torch.nn.parallel.DistributedDataParallel`` for a module on webgpu, its gradients all-reduced by
    :func:`allreduce_hook` (see the module doc), in a process group of the "webgrad" backend (the default
    group unless `process_group` is given). Keywords go to DDP."""
    group = process_group if process_group is not None else dist.group.WORLD
    if not isinstance(group, ProcessGroupWebgpu):
        raise RuntimeError("webgpu DDP needs a process group of the 'webgrad' backend (gloo, with webgpu tensors "
                           "staged through the host): dist.init_process_group('webgrad', ...), after importing "
                           "webgrad.torch_device.distributed")
    kwargs.setdefault("broadcast_buffers", False)
    ddp = torch.nn.parallel.DistributedDataParallel(module, process_group=process_group, **kwargs)
    ddp.register_comm_hook(process_group, allreduce_hook)
    return ddp
