"""torch.multiprocessing: Python's multiprocessing, with PyTorch's additions (spawn, start_processes, sharing
strategies).

Processes that hold no webgrad tensors work as Python's do. Sharing tensors between processes is not supported:
a webgrad tensor's storage is a NumPy array of this process or a buffer of its WebGPU device, and neither has a
shared-memory form, so Tensor.share_memory_(), Module.share_memory() and a Process (or spawn) given tensors or
modules raise RuntimeError saying so, rather than letting each process train its own copy in silence. Hogwild!
training (processes updating one model's shared weights, as pytorch/examples' mnist_hogwild) needs that sharing:
train in one process instead.
"""

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403  (Queue, Pool, Event, set_start_method, cpu_count, ...)

from ._sharing import not_shared

__all__ = list(_mp.__all__) + ["spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
                               "ProcessExitedException", "get_sharing_strategy", "set_sharing_strategy",
                               "get_all_sharing_strategies"]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = ["file_descriptor"]

def _holds_tensors(obj, depth=0):
    # webgrad's Tensor and Module, known by their classes' modules (this module imports neither)
    if any(c.__module__ in ("webgrad._tensor", "webgrad.nn.module") for c in type(obj).__mro__):
        return True
    if depth >= 4:
        return False
    if isinstance(obj, dict):
        return any(_holds_tensors(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_holds_tensors(v, depth + 1) for v in obj)
    return False


def _check(args, kwargs, what):
    if _holds_tensors(tuple(args or ())) or _holds_tensors(dict(kwargs or {})):
        raise not_shared(f"{what} was given a tensor or a module")


class Process(_mp.Process):
    """multiprocessing.Process; refuses arguments that hold webgrad tensors or modules (see the module doc)."""

    def __init__(self, group=None, target=None, name=None, args=(), kwargs=None, *, daemon=None):
        _check(args, kwargs, "Process(target, args)")
        super().__init__(group, target, name, args, kwargs or {}, daemon=daemon)


class ProcessRaisedException(Exception):
    """A process started by spawn() raised: its traceback is the message."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.error_index, self.pid = error_index, error_pid


class ProcessExitedException(Exception):
    """A process started by spawn() exited with a non-zero code."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg)
        self.error_index, self.pid, self.exit_code, self.signal_name = error_index, error_pid, exit_code, signal_name


class ProcessContext:
    """The processes of spawn(join=False): join() waits for them, raising if one failed."""

    def __init__(self, processes):
        self.processes = processes

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        for p in self.processes:
            p.join(timeout)
        for i, p in enumerate(self.processes):
            if p.exitcode not in (0, None):
                raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid,
                                             p.exitcode)
        return all(p.exitcode is not None for p in self.processes)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run fn(i, *args) in nprocs processes (i = 0 .. nprocs-1), as torch.multiprocessing.start_processes."""
    _check(args, None, "spawn(fn, args)")
    ctx = _mp.get_context(start_method)
    processes = [ctx.Process(target=fn, args=(i,) + tuple(args), daemon=daemon) for i in range(nprocs)]
    for p in processes:
        p.start()
    context = ProcessContext(processes)
    if not join:
        return context
    context.join()
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """start_processes with the 'spawn' start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return _strategy[0]


def set_sharing_strategy(new_strategy):
    """Accepted for PyTorch scripts (no tensor is shared either way: see the module doc)."""
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"sharing strategy must be one of {list(_STRATEGIES)}, got {new_strategy!r}")
    _strategy[0] = new_strategy
