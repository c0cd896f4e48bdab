"""Data-parallel training on webgpu tensors: PyTorch's DistributedDataParallel, gradients reduced through gloo.

    import webgrad.torch_device.distributed as wdist
    dist.init_process_group("webgrad", ...)               # gloo for CPU tensors, staged copies for webgpu ones
    model = Net().to("webgpu")                            # one process per GPU; LOCAL_RANK picks its adapter
    ddp = wdist.DistributedDataParallel(model)
    ... ddp(x).sum().backward(); opt.step()               # gradients averaged across the ranks

gloo moves CPU tensors only, and the GPUs here are reached through WebGPU, which shares no memory with other
processes, so each gradient bucket crosses the host. DDP's reducer hands a bucket (a flat webgpu tensor of
gradients) to the communication hook :func:`allreduce_hook` as soon as the backward has produced it.

Where every rank runs on one host (the usual case: one process per local GPU), the hook averages the bucket
before it returns (:class:`SharedReducer`): it reads the bucket back into this rank's slot of a segment of
shared memory (waiting for the GPU work that produced it), meets the other ranks at a barrier through named
pipes, uploads their slots and adds them on the GPU into the bucket, which is the future's value; DDP then
copies each parameter's part into its ``.grad`` on the device. Memory bandwidth instead of gloo's TCP over
loopback (ResNet-18's 45 MB of gradients took 86 ms through gloo on an H200 host), and the host adds nothing
(averaging there, a copy out and an upload per parameter held the compiled MNIST CNN at 0.90 scaling efficiency
on two H200s, 0.99 since). Across hosts the hook reads
the bucket back and hands it to gloo's all-reduce, asynchronously, so the reduction of bucket k runs while
the backward of the layers before it is computed; when the backward ends, DDP waits for the reductions and
copies the averaged gradients into the device gradients (one upload per parameter).

The process group backend "webgrad" (:class:`ProcessGroupWebgpu`, registered with torch.distributed on import)
is gloo for CPU tensors and gloo through host copies for webgpu tensors (read back, collective, written back,
synchronously): what DDP's own collectives need (the initial broadcast of rank 0's parameters and buffers,
the check of their shapes, the rebuilding of its buckets), and any dist.all_reduce(t) of a webgpu tensor.
:func:`DistributedDataParallel` builds DDP for a webgpu module with the hook registered and buffers broadcast
at construction only (``broadcast_buffers=False``: a broadcast at every forward would be a read-back each step;
BatchNorm statistics then stay per rank).
"""

import os
import socket
import tempfile
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
    """DDP communication hook for webgpu gradients. On one host the bucket is averaged on the device
    (:meth:`SharedReducer.average`, before the hook returns); across hosts it is read back and all-reduced by
    gloo asynchronously, and the future's value is the CPU result, which DDP copies into the device gradients."""
    group = group if group is not None else dist.group.WORLD
    buffer = bucket.buffer()
    reducer = group.reducer() if isinstance(group, ProcessGroupWebgpu) else None
    if isinstance(reducer, SharedReducer):
        fut = torch.futures.Future()
        fut.set_result(reducer.average(bucket.index(), buffer))
        return fut
    start = time.perf_counter()
    host = st.to_cpu(buffer)
    TIMINGS.read += time.perf_counter() - start
    TIMINGS.buckets += 1
    if reducer is None:
        host.div_(dist.get_world_size(group))
        work = dist.all_reduce(host, group=group, async_op=True)
        return work.get_future().then(lambda fut: host)
    return reducer.submit(bucket.index(), host)


class SharedReducer:
    """Averages webgpu gradient buckets over the ranks of one host, through shared memory and on the device, in
    the order the buckets come (the same on every rank, as DDP's reducer makes them).

    A segment per (bucket index, size) holds two rounds of a slot per rank. :meth:`average` reads this rank's
    bucket into its slot of this round, meets the others at a barrier, uploads their slots and adds all the
    ranks' buckets on the GPU, in rank order on every rank (so every rank gets the same bits), into the bucket
    itself. What crosses the host is one read-back and one upload per other rank; the host adds nothing. The
    rounds alternate between the two halves of the segment: a rank writes the half it uploaded from two rounds
    before only after the barrier of the round between, which every other rank reaches only after its
    uploads from that half. The barriers go through named pipes (_barrier). Rank 0 makes the segments and the
    pipes, and the others attach to them after a barrier; they go when the reducer does.

    Ranks on one host should run PyTorch's CPU ops on few threads each (torchrun sets OMP_NUM_THREADS=1): with
    every rank's thread pool as wide as the host, their spinning threads starve the ranks' Python threads."""

    def __init__(self, group, prefix):
        import atexit
        self.group, self.gloo = group, group.gloo
        self.rank, self.world = group.rank(), group.size()
        self._segments = {}  # (bucket index, nbytes) -> (file path, its uint8 tensor mapped shared)
        self._rounds = {}  # bucket index -> rounds averaged
        folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        self._prefix = os.path.join(folder, prefix)  # rank 0's choice, unique to this group
        self._fifos = [f"{self._prefix}_fifo_{r}" for r in range(self.world)]
        if self.rank == 0:
            for path in self._fifos:
                os.mkfifo(path)
        self.gloo.barrier(dist.BarrierOptions()).wait()  # (the one gloo barrier: the pipes exist)
        # read and write ends held open by every rank (O_RDWR: opening never blocks, reads never see an end)
        self._fds = [os.open(path, os.O_RDWR) for path in self._fifos]
        self._arrived = [0] * self.world  # barriers each rank has announced to this one
        self._epoch = 0
        atexit.register(self.close)

    def average(self, index, bucket):
        """Bucket `index` (a flat webgpu tensor) replaced by its mean over the ranks; returns it."""
        n = bucket.numel()
        nbytes = n * bucket.element_size()
        rounds = self._rounds.get(index, 0)
        self._rounds[index] = rounds + 1
        segment = self._segment(index, nbytes)[:2 * self.world * nbytes].view(bucket.dtype)
        slots = segment.view(2, self.world, n)[rounds % 2]
        start = time.perf_counter()
        st.read_into(bucket, slots[self.rank])
        TIMINGS.read += time.perf_counter() - start
        TIMINGS.buckets += 1
        start = time.perf_counter()
        self._barrier()
        with torch.no_grad():
            total = None
            for r in range(self.world):
                part = bucket if r == self.rank else st.from_cpu(slots[r])
                total = part if total is None else total + part
            torch.div(total, self.world, out=bucket)
        TIMINGS.reduce += time.perf_counter() - start
        return bucket

    def _barrier(self):
        """Wait until every rank has reached its barrier of this number. Through named pipes, one per rank: each
        announces itself to every other with its rank (2 bytes) and counts the announcements it reads. A
        round trip of microseconds where gloo's barrier took hundreds (a third of the 2-rank overhead of the
        MNIST CNN's step); the pipe's system calls also order each rank's writes to the segments before
        the others' reads of them."""
        self._epoch += 1
        me = self.rank.to_bytes(2, "little")
        for r, fd in enumerate(self._fds):
            if r != self.rank:
                os.write(fd, me)
        pending = b""
        while min(n for r, n in enumerate(self._arrived) if r != self.rank) < self._epoch:
            pending += os.read(self._fds[self.rank], 2 * self.world)
            for i in range(0, len(pending) - 1, 2):
                self._arrived[int.from_bytes(pending[i:i + 2], "little")] += 1
            pending = pending[len(pending) // 2 * 2:]

    def _segment(self, index, nbytes):
        key = (index, nbytes)
        held = self._segments.get(key)
        if held is None:
            path = f"{self._prefix}_{index}_{nbytes}"
            size = max(2 * self.world * nbytes, 1)
            if self.rank == 0:  # a file in shared memory, mapped by every rank
                with open(path, "wb") as f:
                    f.truncate(size)
            self._barrier()
            held = self._segments[key] = (path, torch.from_file(path, shared=True, size=size, dtype=torch.uint8))
        return held[1]

    def close(self):
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        if self.rank == 0:
            for path in [path for path, _ in self._segments.values()] + self._fifos:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        self._segments.clear()


class _GlooReducer:
    """gloo's all-reduce of the averaged bucket, asynchronous (ranks on several hosts)."""

    def __init__(self, group):
        self.group = group

    def submit(self, index, host):
        host.div_(self.group.size())
        opts = dist.AllreduceOptions()
        work = self.group.gloo.allreduce([host], opts)
        return work.get_future().then(lambda fut: host)


class ProcessGroupWebgpu(dist.ProcessGroup):
    """The "webgrad" process group: a gloo group for CPU tensors, and for webgpu tensors gloo on host copies,
    read back before and written back after each collective (see the module doc)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self.gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._reducer = None

    def reducer(self):
        """What averages the hook's buckets: shared memory where all ranks share this host, else gloo."""
        if self._reducer is None:
            seen = [None] * self.size()
            prefix = f"webgrad{os.getpid():x}_{time.time_ns() % 0xffffffff:x}"
            dist.all_gather_object(seen, (socket.gethostname(), prefix), group=self)
            one_host = len({host for host, _ in seen}) == 1 and self.size() > 1
            self._reducer = SharedReducer(self, seen[0][1]) if one_host else _GlooReducer(self)
        return self._reducer

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

    def shutdown(self):
        """dist.destroy_process_group(): the reducer's thread and shared segments go (spawned ranks exit
        without running atexit hooks)."""
        if self._reducer is not None and hasattr(self._reducer, "close"):
            self._reducer.close()
        self.gloo.shutdown()


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
