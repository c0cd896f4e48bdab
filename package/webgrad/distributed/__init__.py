"""torch.distributed for a world of one process: what a training script asks of it when it runs alone.

Scripts written for several processes run unchanged as one: rank 0 of a world of 1.

- get_rank() is 0 and get_world_size() is 1, before and after init_process_group; is_initialized() tells
  whether init_process_group ran (it accepts a world of one: world_size 1, or unset with WORLD_SIZE unset
  or 1 in the environment).
- The collectives (all_reduce, broadcast, reduce, all_gather, gather, scatter, reduce_scatter, barrier and
  their object versions) do what they do in a world of one: a tensor reduced over one process is itself,
  a list gathered from one process holds its one tensor. They need no init_process_group, and with
  async_op=True they return a completed Work.
- A world of several processes is refused by init_process_group with an error saying so; webgrad cannot
  launch or join other processes here. (PyTorch raises where a collective runs before init_process_group;
  here a world of one is always there.)
"""

import os

from .._autograd import no_grad


class ReduceOp:
    """The reductions of all_reduce/reduce; in a world of one each leaves the tensor as it is."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"


class Backend(str):
    """A backend name, as torch.distributed.Backend: Backend.GLOO == "gloo"."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    UCC = "ucc"
    XCCL = "xccl"

    def __new__(cls, name):
        return str.__new__(cls, str(name).lower())


class ProcessGroup:
    """A group of processes: here the world, of one process."""

    def __init__(self, backend):
        self.backend = Backend(backend)

    def rank(self):
        return 0

    def size(self):
        return 1

    def __repr__(self):
        return f"ProcessGroup(backend={self.backend!r}, rank=0, size=1)"


class Work:
    """What an async_op=True collective returns: in a world of one it is complete when returned."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True


class _GroupMember:
    WORLD = None  # the default group once init_process_group ran, as torch.distributed.group.WORLD
    NON_GROUP_MEMBER = object()


group = GroupMember = _GroupMember

_NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."


def is_available():
    """True: the world of one needs no communication library."""
    return True


def is_initialized():
    return _GroupMember.WORLD is not None


def is_torchelastic_launched():
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_gloo_available():
    return False


def is_nccl_available():
    return False


def is_mpi_available():
    return False


def _env_int(name, given):
    if given is not None and given != -1:
        return int(given)
    value = os.environ.get(name)
    return None if value is None else int(value)


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Join the default group: accepted for a world of one (world_size 1, or WORLD_SIZE unset or 1)."""
    if is_initialized():
        raise ValueError("trying to initialize the default process group twice!")
    size = _env_int("WORLD_SIZE", world_size)
    me = _env_int("RANK", rank)
    if size not in (None, 1):
        raise RuntimeError(f"init_process_group: a world of {size} processes is not supported; webgrad.distributed "
                           "runs a world of one process (rank 0 of world_size 1). Launch the script once, without "
                           "torchrun, or with --nproc_per_node=1")
    if me not in (None, 0):
        raise ValueError(f"init_process_group: rank {me} is out of range for a world of 1 process")
    _GroupMember.WORLD = ProcessGroup(backend or Backend.GLOO)


def destroy_process_group(group=None):
    if not is_initialized():
        raise AssertionError("destroy_process_group: the default process group has not been initialized "
                             "(init_process_group was not called)")
    _GroupMember.WORLD = None


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of the given ranks: in a world of one, only rank 0 can be in it."""
    if ranks is not None and sorted(set(ranks)) != [0]:
        raise ValueError(f"new_group: ranks {list(ranks)} are not in a world of 1 process (only rank 0 is)")
    return ProcessGroup(backend or (_GroupMember.WORLD.backend if is_initialized() else Backend.GLOO))


def get_rank(group=None):
    return 0


def get_world_size(group=None):
    return 1


def get_backend(group=None):
    if group is not None:
        return group.backend
    if not is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return _GroupMember.WORLD.backend


def get_node_local_rank(fallback_rank=None):
    return int(os.environ.get("LOCAL_RANK", 0 if fallback_rank is None else fallback_rank))


def _done(async_op):
    return Work() if async_op else None


def _check_rank(name, rank, what):
    if rank not in (None, 0):
        raise RuntimeError(f"{name}: invalid {what} rank {rank} in a world of 1 process (only rank 0 exists)")


def _check_list(name, tensors, what):
    if tensors is None or len(tensors) != 1:
        got = "None" if tensors is None else len(tensors)
        raise RuntimeError(f"{name}: invalid {what} tensor list (expected length 1, got {got})")


def barrier(group=None, async_op=False, device_ids=None, timeout=None):
    """Nothing to wait for: the one process is here."""
    return _done(async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """The tensor is already the reduction over the world of one (sum, average, min, max, ... of itself)."""
    return _done(async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    _check_rank("reduce", dst if group_dst is None else group_dst, "destination")
    return _done(async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    _check_rank("broadcast", src if group_src is None else group_src, "root")
    return _done(async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    _check_list("all_gather", tensor_list, "output")
    with no_grad():
        tensor_list[0].copy_(tensor)
    return _done(async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    with no_grad():
        output_tensor.copy_(input_tensor.reshape(output_tensor.shape))
    return _done(async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    _check_rank("gather", dst if group_dst is None else group_dst, "destination")
    if gather_list is not None:
        _check_list("gather", gather_list, "output")
        with no_grad():
            gather_list[0].copy_(tensor)
    return _done(async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    _check_rank("scatter", src if group_src is None else group_src, "source")
    _check_list("scatter", scatter_list, "input")
    with no_grad():
        tensor.copy_(scatter_list[0])
    return _done(async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    _check_list("reduce_scatter", input_list, "input")
    with no_grad():
        output.copy_(input_list[0])
    return _done(async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    _check_list("all_to_all", output_tensor_list, "output")
    _check_list("all_to_all", input_tensor_list, "input")
    with no_grad():
        output_tensor_list[0].copy_(input_tensor_list[0])
    return _done(async_op)


def all_gather_object(object_list, obj, group=None):
    if len(object_list) != 1:
        raise RuntimeError(f"all_gather_object: object_list has length {len(object_list)}; a world of 1 needs 1")
    object_list[0] = obj


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    _check_rank("broadcast_object_list", src if group_src is None else group_src, "source")


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    _check_rank("gather_object", dst if group_dst is None else group_dst, "destination")
    if object_gather_list is not None:
        object_gather_list[0] = obj
