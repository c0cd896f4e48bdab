"""The module paths PyTorch scripts import, and what they find there: torch.nn.modules.*, torch.nn.parallel,
torch.nn.utils.rnn, torch.distributed (a world of one), torch.utils.data.*, torch.utils.checkpoint,
torch.jit, torch.onnx, torch.cuda.amp, torch.backends.cuda. Compared with the real torch wherever
behaviour can be compared; the import paths themselves are checked under as_torch() in a fresh interpreter."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.modules  # noqa: E402
import torch.nn.modules.utils  # noqa: E402
import torch.nn.utils.rnn as trnn  # noqa: E402
import torch.utils.data as tdata  # noqa: E402
import torch.utils.data.distributed  # noqa: E402,F401

import webgrad as wg  # noqa: E402
import webgrad.nn.modules as wmodules  # noqa: E402
import webgrad.nn.parallel as wparallel  # noqa: E402
import webgrad.nn.utils.rnn as wrnn  # noqa: E402
import webgrad.utils.checkpoint as wcheckpoint  # noqa: E402
from webgrad import distributed as wdist  # noqa: E402
from webgrad.utils import data as wdata  # noqa: E402
from helpers import PACKAGE_DIR  # noqa: E402

AS_TORCH = textwrap.dedent("""
    import warnings
    import webgrad
    torch = webgrad.as_torch()
    import torch.nn.modules, torch.nn.modules.module, torch.nn.modules.linear, torch.nn.modules.conv
    import torch.nn.modules.activation, torch.nn.modules.loss, torch.nn.modules.container
    import torch.nn.modules.batchnorm, torch.nn.modules.dropout, torch.nn.modules.rnn
    import torch.nn.modules.transformer, torch.nn.modules.utils
    import torch.utils.data.dataloader, torch.utils.data.sampler, torch.utils.data.dataset
    import torch.utils.data.distributed, torch.utils.checkpoint
    import torch.nn.parallel, torch.distributed, torch.cuda.amp, torch.backends.cuda, torch.backends.cudnn
    import torch.backends.mps, torch.onnx, torch.jit, torch.nn.utils.rnn
    from torch.nn.modules.module import Module
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.loss import _Loss
    from torch.nn.modules.utils import _pair
    from torch.utils.data.dataloader import DataLoader, default_collate
    from torch.utils.data.sampler import Sampler, RandomSampler
    from torch.utils.data.dataset import Dataset, IterableDataset
    from torch.utils.data.distributed import DistributedSampler
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed import init_process_group, destroy_process_group
    from torch.autograd import Variable
    from torch.optim.optimizer import Optimizer
    assert Module is torch.nn.Module and torch.nn.modules.linear.Linear is torch.nn.Linear
    assert torch.nn.modules.Linear is torch.nn.Linear and isinstance(torch.nn.BatchNorm2d(3), _BatchNorm)
    assert DataLoader is torch.utils.data.DataLoader and RandomSampler is torch.utils.data.RandomSampler
    assert Optimizer is torch.optim.Optimizer  # the same class, not a second copy of optimizer.py
    assert torch.cuda.amp.GradScaler is webgrad.cuda.amp.GradScaler
    assert torch.backends.cuda.matmul.allow_tf32 is False
    torch.backends.cuda.matmul.allow_tf32 = True
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.distributed.get_world_size() == 1 and not torch.distributed.is_initialized()
    x = torch.FloatTensor(2, 3)
    assert isinstance(x, torch.FloatTensor) and x.type() == "torch.FloatTensor" and not x.is_cuda
    for missing in ("torch.nonexistent", "torch.nn.nonexistent"):
        try:
            __import__(missing)
            raise AssertionError(missing)
        except ModuleNotFoundError as e:
            assert repr(missing) in str(e), e
    print("ok")
""")


def test_import_paths_under_as_torch():
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    proc = subprocess.run([sys.executable, "-c", AS_TORCH], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


# ----------------------------------------------------------------- torch.nn.modules
def test_nn_modules_names_are_torchs():
    for short, names in wmodules.PUBLIC.items():
        theirs = set(getattr(torch.nn.modules, short).__all__)
        assert set(names.split()) <= theirs, (short, set(names.split()) - theirs)
        ours = getattr(wmodules, short)
        for name in names.split():
            if hasattr(wg.nn, name):
                assert getattr(ours, name) is getattr(wg.nn, name)
                assert name in ours.__all__ and name in dir(ours)
            elif name in wmodules.PRIVATE.get(short, {}):  # public there, not at torch.nn (LazyModuleMixin)
                assert name in ours.__all__ and name in dir(ours) and getattr(ours, name).__name__ == name
            else:
                with pytest.raises(AttributeError, match=f"webgrad.nn has no {name}"):
                    getattr(ours, name)
    assert wmodules.Linear is wg.nn.Linear and wmodules.module.Module is wg.nn.Module
    missing = next(n for names in wmodules.PUBLIC.values() for n in names.split() if not hasattr(wg.nn, n))
    with pytest.raises(ImportError, match=missing):
        exec(f"from webgrad.nn.modules.{_submodule_of(missing)} import {missing}")


def _submodule_of(name):
    return next(short for short, names in wmodules.PUBLIC.items() if name in names.split())


def test_nn_modules_utils_as_torch():
    t, w = torch.nn.modules.utils, wmodules.utils
    for fn in ("_single", "_pair", "_triple", "_quadruple"):
        for arg in (3, (1, 2), [4, 5, 6]):
            assert getattr(w, fn)(arg) == getattr(t, fn)(arg)
    assert w._reverse_repeat_tuple((1, 2, 3), 2) == t._reverse_repeat_tuple((1, 2, 3), 2)
    assert w._list_with_default([None, 3], [8, 9, 10]) == t._list_with_default([None, 3], [8, 9, 10])
    assert w._list_with_default(5, [1]) == t._list_with_default(5, [1])
    with pytest.raises(ValueError):
        w._list_with_default([1, 2], [3])
    ours, theirs = {"module.a": 1, "module.b.c": 2, "d": 3}, {"module.a": 1, "module.b.c": 2, "d": 3}
    w.consume_prefix_in_state_dict_if_present(ours, "module.")
    t.consume_prefix_in_state_dict_if_present(theirs, "module.")
    assert ours == theirs
    clones = w._get_clones(wg.nn.Linear(2, 2), 3)
    assert len(clones) == 3 and clones[0].weight is not clones[1].weight
    assert clones[0].weight.tolist() == clones[2].weight.tolist()


# ----------------------------------------------------------------- torch.nn.parallel, torch.distributed
def _net():
    wg.manual_seed(0)
    return wg.nn.Sequential(wg.nn.Linear(3, 4), wg.nn.ReLU(), wg.nn.Linear(4, 2))


def test_data_parallel_runs_the_module():
    net, x = _net(), wg.randn(5, 3)
    dp = wparallel.DataParallel(net)
    assert dp.module is net and dp(x).tolist() == net(x).tolist()
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))).state_dict())
    assert wparallel.data_parallel(net, x).tolist() == net(x).tolist()


def test_distributed_data_parallel_in_a_world_of_one():
    with pytest.raises(ValueError) as theirs:
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
    with pytest.raises(theirs.type, match="init_process_group"):
        wparallel.DistributedDataParallel(_net())
    with pytest.raises(RuntimeError, match="world of 2"):
        wdist.init_process_group("gloo", world_size=2, rank=0)
    assert not wdist.is_initialized()
    wdist.init_process_group("nccl")
    try:
        assert wdist.is_initialized() and wdist.get_backend() == "nccl"
        with pytest.raises(ValueError, match="twice"):
            wdist.init_process_group("gloo")
        plain, wrapped = _net(), wparallel.DistributedDataParallel(_net(), device_ids=[0])
        x, y = wg.randn(6, 3), wg.randn(6, 2)
        for model in (plain, wrapped):
            wg.nn.functional.mse_loss(model(x), y).backward()
        for a, b in zip(plain.parameters(), wrapped.module.parameters()):
            assert a.grad.tolist() == b.grad.tolist()  # averaged over one process: the gradient itself
        assert [k.removeprefix("module.") for k in wrapped.state_dict()] == list(plain.state_dict())
        with wrapped.no_sync():
            assert wrapped.require_backward_grad_sync is False
        assert wrapped.require_backward_grad_sync is True
    finally:
        wdist.destroy_process_group()
    assert not wdist.is_initialized()


def test_distributed_collectives_in_a_world_of_one():
    assert wdist.is_available() and wdist.get_rank() == 0 and wdist.get_world_size() == 1
    assert wdist.barrier() is None and wdist.barrier(async_op=True).wait()
    x = wg.tensor([1.0, 2.0])
    for op in (wdist.ReduceOp.SUM, wdist.ReduceOp.AVG, wdist.ReduceOp.MAX):
        assert wdist.all_reduce(x, op=op) is None and x.tolist() == [1.0, 2.0]
    assert wdist.all_reduce(x, async_op=True).is_completed()
    wdist.broadcast(x, src=0)
    with pytest.raises(RuntimeError, match="invalid root rank 1"):
        wdist.broadcast(x, src=1)
    gathered = [wg.zeros(2)]
    wdist.all_gather(gathered, x)
    assert gathered[0].tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="expected length 1, got 2"):
        wdist.all_gather([wg.zeros(2), wg.zeros(2)], x)
    objects = [None]
    wdist.all_gather_object(objects, {"loss": 1.5})
    assert objects == [{"loss": 1.5}]
    with pytest.raises(ValueError, match="init_process_group"):
        wdist.get_backend()
    with pytest.raises(AssertionError):
        wdist.destroy_process_group()


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 1, False), (10, 3, False), (10, 3, True), (7, 4, False),
                                                  (2, 5, False)])
def test_distributed_sampler_shares_as_torch(n, replicas, drop_last):
    data = list(range(n))
    for rank in range(replicas):
        ours = wdata.DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = tdata.distributed.DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=False,
                                                      drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    with pytest.raises(ValueError, match="Invalid rank"):
        wdata.DistributedSampler(data, num_replicas=2, rank=2)


def test_distributed_sampler_shuffles_per_epoch():
    data = list(range(20))
    sampler = wdata.DistributedSampler(data)  # the world of one: every index, shuffled
    assert sampler.num_replicas == 1 and sampler.rank == 0
    first = list(sampler)
    assert sorted(first) == data and list(sampler) == first  # the same epoch: the same order
    sampler.set_epoch(1)
    assert list(sampler) != first and sorted(sampler) == data
    shares = [set(wdata.DistributedSampler(data, num_replicas=3, rank=r, seed=5)) for r in range(3)]
    assert set().union(*shares) == set(data)  # one permutation for every rank: the shares cover the data


# ----------------------------------------------------------------- torch.nn.utils.rnn
def test_pad_and_pack_sequences_as_torch():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 3)).astype(np.float32) for n in (2, 5, 3, 5)]
    ours = [wg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    for batch_first in (False, True):
        for side in ("right", "left"):
            a = wrnn.pad_sequence(ours, batch_first=batch_first, padding_value=-1.0, padding_side=side)
            b = trnn.pad_sequence(theirs, batch_first=batch_first, padding_value=-1.0, padding_side=side)
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    lengths = [2, 5, 3, 5]
    wp = wrnn.pack_padded_sequence(wrnn.pad_sequence(ours, batch_first=True), lengths, batch_first=True,
                                   enforce_sorted=False)
    tp = trnn.pack_padded_sequence(trnn.pad_sequence(theirs, batch_first=True), lengths, batch_first=True,
                                   enforce_sorted=False)
    for field in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(np.asarray(getattr(wp, field).tolist()), getattr(tp, field).detach().numpy())
    wu, wl = wrnn.pad_packed_sequence(wp, batch_first=True, total_length=6)
    tu, tl = trnn.pad_packed_sequence(tp, batch_first=True, total_length=6)
    np.testing.assert_array_equal(wu.detach().numpy(), tu.detach().numpy())
    assert wl.tolist() == tl.tolist()
    g = rng.standard_normal(tuple(tu.shape)).astype(np.float32)
    (wu * wg.tensor(g)).sum().backward()
    (tu * torch.tensor(g)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    back = wrnn.unpack_sequence(wrnn.pack_sequence(ours, enforce_sorted=False))
    assert [x.detach().numpy().tolist() for x in back] == [a.tolist() for a in arrays]
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        wrnn.pack_padded_sequence(wrnn.pad_sequence(ours), lengths)
    with pytest.raises(RuntimeError, match="greater than 0"):
        wrnn.pack_padded_sequence(wrnn.pad_sequence(ours), [5, 5, 3, 0])


# ----------------------------------------------------------------- torch.utils.checkpoint, torch.jit, torch.onnx
def test_checkpoint_gives_the_functions_values_and_gradients():
    net = _net()
    x = wg.randn(4, 3, requires_grad=True)
    direct = net(x)
    direct.sum().backward()
    expected = [p.grad.tolist() for p in net.parameters()] + [x.grad.tolist()]
    net.zero_grad()
    x.grad = None
    out = wcheckpoint.checkpoint(net, x, use_reentrant=False)
    assert out.tolist() == direct.tolist()
    out.sum().backward()
    assert [p.grad.tolist() for p in net.parameters()] + [x.grad.tolist()] == expected
    assert wcheckpoint.checkpoint_sequential(net, 2, x).tolist() == direct.tolist()


def test_jit_returns_what_it_is_given_with_a_warning():
    net = _net()

    def f(x):
        return x * 2

    with pytest.warns(UserWarning, match="no TorchScript"):
        assert wg.jit.script(net) is net
    with pytest.warns(UserWarning, match="no TorchScript"):
        assert wg.jit.trace(f, (wg.ones(2),)) is f

    @wg.jit.ignore
    def a():
        return 1

    @wg.jit.ignore(drop=True)
    def b():
        return 2

    assert (a(), b(), wg.jit.unused(f) is f, wg.jit.export(f) is f) == (1, 2, True, True)
    assert wg.jit.is_scripting() is False and wg.jit.is_tracing() is False
    assert wg.jit.annotate(list, [1]) == [1] and wg.jit.wait(wg.jit.fork(f, 3)) == 6
    with pytest.raises(RuntimeError, match="state_dict"):
        wg.jit.save(net, "m.pt")


def test_onnx_imports_and_export_says_it_is_unsupported():
    assert wg.onnx.is_in_onnx_export() is False
    with pytest.raises(RuntimeError, match="onnx.export is not supported"):
        wg.onnx.export(_net(), (wg.ones(1, 3),), "model.onnx")


# ----------------------------------------------------------------- torch.cuda.amp, torch.backends.cuda
def test_cuda_amp_aliases_warn_as_torch():
    for make in (lambda m: m.cuda.amp.GradScaler(enabled=False), lambda m: m.cuda.amp.autocast(enabled=False)):
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            made = make(wg)
        with warnings.catch_warnings(record=True) as theirs:
            warnings.simplefilter("always")
            make(torch)
        deprecations = [str(w.message) for w in theirs if w.category is FutureWarning]
        assert [str(w.message) for w in ours if w.category is FutureWarning] == deprecations
    assert isinstance(made, wg.amp.autocast)
    with made:
        assert (wg.ones(2) + 1).tolist() == [2.0, 2.0]
    with pytest.warns(FutureWarning):
        scaler = wg.cuda.amp.GradScaler(enabled=False)
    assert isinstance(scaler, wg.amp.GradScaler) and not scaler.is_enabled()


def test_backends_cuda_switches_as_torch():
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        assert getattr(wg.backends.cuda.matmul, name) == getattr(torch.backends.cuda.matmul, name), name
    before = wg.backends.cuda.matmul.allow_tf32
    try:
        wg.backends.cuda.matmul.allow_tf32 = True
        assert wg.backends.cuda.matmul.allow_tf32 is True
    finally:
        wg.backends.cuda.matmul.allow_tf32 = before
    with pytest.raises(AttributeError):
        torch.backends.cuda.matmul.no_such_switch = 1
    with pytest.raises(AttributeError, match="Unknown attribute"):
        wg.backends.cuda.matmul.no_such_switch = 1
    assert wg.backends.cuda.is_built() is torch.backends.cuda.is_built() is False
    assert wg.backends.cuda.flash_sdp_enabled() is True
    with pytest.warns(FutureWarning, match="sdp_kernel"):
        with wg.backends.cuda.sdp_kernel(enable_flash=False):
            assert wg.backends.cuda.flash_sdp_enabled() is False
    assert wg.backends.cuda.flash_sdp_enabled() is True
    with pytest.raises(AssertionError):
        torch.cuda.current_device()
    with pytest.raises(AssertionError, match="no CUDA"):
        wg.cuda.current_device()


def test_cuda_amp_disables_itself_without_a_gpu(monkeypatch):
    import webgrad.cuda.amp as cuda_amp
    monkeypatch.setattr(cuda_amp, "_gpu_available", lambda: False)
    for make in (cuda_amp.GradScaler, cuda_amp.autocast):
        with pytest.warns(UserWarning, match="no WebGPU device"):
            with pytest.warns(FutureWarning):
                made = make()
        assert not (made.is_enabled() if isinstance(made, wg.amp.GradScaler) else made._enabled)


def test_cuda_memory_and_rng_calls_answer_as_torch_without_cuda():
    """What PyTorch on a machine without CUDA returns (0, [], None) webgrad returns; what it refuses with
    AssertionError (a state or seed of a device that is not there), webgrad refuses the same way."""
    for name in ("memory_reserved", "max_memory_reserved"):
        assert getattr(wg.cuda, name)() == getattr(torch.cuda, name)() == 0
    assert wg.cuda.get_rng_state_all() == torch.cuda.get_rng_state_all() == []
    for call in (lambda m: m.set_rng_state(m_bytes(m)), lambda m: m.set_rng_state_all([]), lambda m: m.seed(),
                 lambda m: m.seed_all()):
        assert call(wg.cuda) is None and call(torch.cuda) is None
    for name in ("get_rng_state", "initial_seed", "mem_get_info"):
        with pytest.raises(AssertionError):
            getattr(torch.cuda, name)()
        with pytest.raises(AssertionError, match="no CUDA device"):
            getattr(wg.cuda, name)()
    # PyTorch's own raises an internal AttributeError here; nothing was allocated, so nothing to reset
    assert wg.cuda.reset_peak_memory_stats() is None and wg.cuda.reset_max_memory_allocated() is None


def m_bytes(module):
    return (torch if module is torch.cuda else wg).ByteTensor()
