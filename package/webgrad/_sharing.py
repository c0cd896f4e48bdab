"""The error for sharing tensors between processes, which webgrad does not support (see webgrad.multiprocessing).
A module of its own, importing nothing, so that Tensor, Module and webgrad.multiprocessing all raise it."""

NOT_SHARED = ("webgrad cannot share tensors between processes: a tensor's storage is a NumPy array of this process "
              "or a buffer of its WebGPU device, with no shared-memory form ({what}). Hogwild!-style training, where "
              "processes update one model's shared weights, is not supported: train in one process")


def not_shared(what):
    """The RuntimeError for an attempt to share tensors (`what` names the call)."""
    return RuntimeError(NOT_SHARED.format(what=what))
