"""Which WebGPU adapter a process takes when several processes share a host (data-parallel ranks).

By default wgpu picks one adapter (``request_adapter``): every process on a host gets the same one. With
several GPUs, each rank should take its own:

- ``WEBGRAD_ADAPTER_INDEX=i`` takes adapter i of ``wgpu.gpu.enumerate_adapters_sync()`` (explicit);
- otherwise ``LOCAL_RANK`` (set by torchrun and webgrad's DDP example) picks among the adapters of the
  preferred kind (the best adapter type, then a native API before OpenGL): rank r takes the
  (r mod n)-th of those n, so ranks share adapters round-robin when there are fewer adapters than ranks;
- with one adapter of that kind (or no LOCAL_RANK) wgpu chooses as usual and the ranks share it.

Pure functions of the adapters' info dicts and the environment, so the choice is testable without GPUs.
"""

# wgpu's adapter_type values, best first; backend_type "OpenGL" comes after the native APIs of a kind
_TYPE_ORDER = ("DiscreteGPU", "IntegratedGPU", "VirtualGPU", "CPU")


def _preference(info):
    kind = info.get("adapter_type", "")
    return (_TYPE_ORDER.index(kind) if kind in _TYPE_ORDER else len(_TYPE_ORDER),
            info.get("backend_type", "") == "OpenGL")


def describe(infos):
    return "; ".join(f"{i}: {info.get('device', '?')} ({info.get('adapter_type', '?')}, "
                     f"{info.get('backend_type', '?')})" for i, info in enumerate(infos))


def wants_choice(environ):
    """Whether the environment asks for a choice at all (enumerating adapters costs time: skip it if not)."""
    return bool(environ.get("WEBGRAD_ADAPTER_INDEX")) or bool(environ.get("LOCAL_RANK"))


def choose_adapter(infos, environ):
    """(index into `infos`, reason) of the adapter to take, or None to let wgpu choose (shared adapter)."""
    explicit = environ.get("WEBGRAD_ADAPTER_INDEX")
    if explicit:
        try:
            index = int(explicit)
        except ValueError:
            raise ValueError(f"WEBGRAD_ADAPTER_INDEX must be an integer, got {explicit!r}") from None
        if not 0 <= index < len(infos):
            raise ValueError(f"WEBGRAD_ADAPTER_INDEX={index}, but wgpu found {len(infos)} adapter(s): "
                             f"{describe(infos) or 'none'}")
        return index, "WEBGRAD_ADAPTER_INDEX"
    local_rank = environ.get("LOCAL_RANK")
    if not local_rank or not infos:
        return None
    try:
        rank = int(local_rank)
    except ValueError:
        raise ValueError(f"LOCAL_RANK must be an integer, got {local_rank!r}") from None
    best = min(_preference(info) for info in infos)
    candidates = [i for i, info in enumerate(infos) if _preference(info) == best]
    if len(candidates) < 2:
        return None
    return candidates[rank % len(candidates)], f"LOCAL_RANK={rank} of {len(candidates)} adapters of the preferred kind"
