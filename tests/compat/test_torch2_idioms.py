"""PyTorch 2.x idioms that new scripts write, each run the same way on torch and on webgrad: module and optimizer
hooks, extra state, load_state_dict(assign=True) after meta-device init, amp's custom_fwd/custom_bwd, default
devices, nn.utils helpers, backend flags and the like."""

import io

import pytest
import torch

import webgrad as wg

LIBS = pytest.mark.parametrize("lib", [torch, wg], ids=["torch", "webgrad"])


# ------------------------------------------------------------------ nn.Module state-dict hooks and extra state
@LIBS
def test_state_dict_pre_and_post_hooks(lib):
    seen = []
    m = lib.nn.Sequential(lib.nn.Linear(2, 2))
    m[0].register_state_dict_pre_hook(lambda module, prefix, keep_vars: seen.append((prefix, keep_vars)))

    def post(module, sd, prefix, local_metadata):
        sd[prefix + "note"] = 1
    m.register_state_dict_post_hook(post)
    assert list(m.state_dict()) == ["0.weight", "0.bias", "note"] and seen == [("0.", False)]
    m.register_state_dict_post_hook(lambda module, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="must return None"):
        m.state_dict()


@LIBS
def test_load_state_dict_post_hook_may_forgive_missing_keys(lib):
    m = lib.nn.Linear(2, 2)
    seen = []

    def post(module, incompatible):
        seen.append(list(incompatible.missing_keys))
        incompatible.missing_keys.clear()
    m.register_load_state_dict_post_hook(post)
    result = m.load_state_dict({"weight": lib.zeros(2, 2)})
    assert seen == [["bias"]] and str(result) == "<All keys matched successfully>"
    assert m.weight.abs().sum().item() == 0


class _Counter:
    """A module with extra state (get_extra_state / set_extra_state), built for either library."""

    @staticmethod
    def make(lib):
        class Counter(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(1, 1)
                self.count = 3

            def get_extra_state(self):
                return {"count": self.count}

            def set_extra_state(self, state):
                self.count = state["count"]
        return Counter


@LIBS
def test_extra_state_saved_and_restored(lib):
    counter = _Counter.make(lib)
    outer = lib.nn.Sequential(counter())
    sd = outer.state_dict()
    assert list(sd) == ["0._extra_state", "0.lin.weight", "0.lin.bias"]
    sd["0._extra_state"] = {"count": 9}
    outer.load_state_dict(sd)
    assert outer[0].count == 9
    del sd["0._extra_state"]
    with pytest.raises(RuntimeError, match='Missing key.*"0._extra_state"'):
        outer.load_state_dict(sd)


@LIBS
def test_meta_init_then_load_state_dict_assign(lib):
    with lib.device("meta"):
        m = lib.nn.Linear(2, 3)
    assert m.weight.is_meta and m.weight.device.type == "meta"
    src = lib.nn.Linear(2, 3).double()
    m.load_state_dict(src.state_dict(), assign=True)
    assert m.weight.device.type == "cpu" and not m.weight.is_meta
    assert m.weight.dtype == lib.float64 and isinstance(m.weight, lib.nn.Parameter) and m.weight.requires_grad
    assert lib.equal(m.weight, src.weight)


@LIBS
def test_global_module_forward_hooks(lib):
    from importlib import import_module
    module_mod = import_module(lib.__name__ + ".nn.modules.module")
    seen = []
    pre = module_mod.register_module_forward_pre_hook(lambda m, args: seen.append(("pre", type(m).__name__)))
    post = module_mod.register_module_forward_hook(lambda m, args, out: out * 0)
    try:
        out = lib.nn.ReLU()(lib.ones(2))
    finally:
        pre.remove(), post.remove()
    assert seen == [("pre", "ReLU")] and out.tolist() == [0.0, 0.0]
    assert lib.nn.ReLU()(lib.ones(1)).tolist() == [1.0]


# ------------------------------------------------------------------ optimizer hooks
@LIBS
def test_optimizer_step_hooks_see_self_first(lib):
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD([p], lr=1.0)
    seen = []
    opt.register_step_pre_hook(lambda o, args, kwargs: seen.append(("pre", args[0] is o, kwargs)))
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append(("post", len(args))))
    p.grad = lib.ones(1)
    opt.step()
    assert seen == [("pre", True, {}), ("post", 1)] and p.item() == -1.0


@LIBS
def test_global_optimizer_step_hook_and_its_removal(lib):
    from importlib import import_module
    optimizer_mod = import_module(lib.__name__ + ".optim.optimizer")
    calls = []
    handle = optimizer_mod.register_optimizer_step_pre_hook(lambda o, a, k: calls.append(type(o).__name__))
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.Adam([p])
    p.grad = lib.ones(1)
    opt.step()
    handle.remove()
    opt.step()
    assert calls == ["Adam"]


@LIBS
def test_optimizer_state_dict_hooks(lib):
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    seen = []
    opt.register_state_dict_pre_hook(lambda o: seen.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: dict(sd, extra=1))
    opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append(sorted(sd)))
    opt.register_load_state_dict_post_hook(lambda o: seen.append("loaded"))
    sd = opt.state_dict()
    assert sorted(sd) == ["extra", "param_groups", "state"]
    opt.load_state_dict(sd)
    assert seen == ["pre", ["extra", "param_groups", "state"], "loaded"]


@LIBS
def test_fused_and_foreach_together_refused(lib):
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        lib.optim.Adam([lib.zeros(1, requires_grad=True)], fused=True, foreach=True)


def test_adafactor_state_round_trip_keeps_load_hooks():
    p = wg.ones(2, 2, requires_grad=True)
    opt = wg.optim.Adafactor([p], lr=0.01)
    p.grad = wg.ones(2, 2)
    opt.step()
    loaded = []
    opt.register_load_state_dict_post_hook(lambda o: loaded.append(True))
    buf = io.BytesIO()
    wg.save(opt.state_dict(), buf)
    buf.seek(0)
    opt.load_state_dict(wg.load(buf))
    assert loaded == [True] and opt.state[p]["row_var"].shape == (2, 1)


# ------------------------------------------------------------------ amp.custom_fwd / custom_bwd
def _scaled_double(lib, seen=None, **fwd_kwargs):
    class Double(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", **fwd_kwargs)
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen.append(lib.is_autocast_enabled("cpu"))
            return g * 2
    return Double


@LIBS
def test_custom_fwd_bwd_keep_forward_autocast_state(lib):
    seen = []
    double = _scaled_double(lib, seen)
    x = lib.ones(2, requires_grad=True)
    with lib.autocast("cpu", dtype=lib.bfloat16):
        y = double.apply(x)
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0] and seen == [True]


@LIBS
def test_custom_fwd_cast_inputs_under_autocast(lib):
    double = _scaled_double(lib, cast_inputs=lib.float32)
    with lib.autocast("cpu", dtype=lib.bfloat16):
        out = double.apply(lib.ones(2, dtype=lib.bfloat16))
    assert out.dtype == lib.float32
    assert double.apply(lib.ones(2, dtype=lib.bfloat16)).dtype == lib.bfloat16  # autocast off: left as given


@LIBS
def test_custom_fwd_needs_device_type(lib):
    with pytest.raises(TypeError, match="device_type"):
        lib.amp.custom_fwd(lambda ctx, x: x)


# ------------------------------------------------------------------ switches scripts set
@LIBS
def test_deterministic_debug_mode(lib):
    try:
        lib.set_deterministic_debug_mode("warn")
        assert lib.get_deterministic_debug_mode() == 1 and lib.is_deterministic_algorithms_warn_only_enabled()
        lib.set_deterministic_debug_mode(2)
        assert lib.are_deterministic_algorithms_enabled() and not lib.is_deterministic_algorithms_warn_only_enabled()
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            lib.set_deterministic_debug_mode("strict")
        with pytest.raises(RuntimeError, match="expected 0, 1, or 2"):
            lib.set_deterministic_debug_mode(5)
    finally:
        lib.set_deterministic_debug_mode("default")
    assert lib.get_deterministic_debug_mode() == 0 and not lib.are_deterministic_algorithms_enabled()


@LIBS
def test_backend_flags_context_managers(lib):
    cudnn = lib.backends.cudnn
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.enabled is False and cudnn.deterministic is True
    assert cudnn.enabled is True and cudnn.deterministic is False
    with lib.backends.mkldnn.flags(enabled=False):
        assert lib.backends.mkldnn.enabled is False
    assert lib.backends.mkldnn.enabled is True
    # (the matmul precision follows set_float32_matmul_precision, which other tests set: read, not assumed)
    assert cudnn.conv.fp32_precision == "tf32" and lib.backends.cuda.matmul.fp32_precision in ("none", "ieee", "tf32")
    with pytest.raises(RuntimeError, match="Unknown precision: fast"):
        cudnn.conv.fp32_precision = "fast"
    assert isinstance(lib.backends.openmp.is_available(), bool) and isinstance(lib.backends.cpu.get_cpu_capability(),
                                                                                str)
    assert lib.backends.opt_einsum.is_available() in (True, False)


@LIBS
def test_compiler_configs_after_a_bare_import(lib):
    saved = lib._dynamo.config.cache_size_limit
    lib._dynamo.config.cache_size_limit = 64
    try:
        assert lib._dynamo.config.cache_size_limit == 64
    finally:
        lib._dynamo.config.cache_size_limit = saved
    with lib._inductor.config.patch(coordinate_descent_tuning=True):
        assert lib._inductor.config.coordinate_descent_tuning is True
    assert lib._inductor.config.coordinate_descent_tuning is False
    assert lib._inductor.config.triton.cudagraphs is False


# ------------------------------------------------------------------ devices, nn.utils, torch.testing, sym_* and cond
@LIBS
def test_set_default_device_none_restores_cpu(lib):
    lib.set_default_device("meta")
    try:
        assert lib.ones(1).device.type == "meta"
    finally:
        lib.set_default_device(None)
    assert lib.get_default_device() == lib.device("cpu") and lib.ones(1).device.type == "cpu"


@LIBS
def test_skip_init_and_fusion_from_nn_utils(lib):
    m = lib.nn.utils.skip_init(lib.nn.Linear, 3, 2)
    assert m.weight.shape == (2, 3) and m.weight.device.type == "cpu" and not m.weight.is_meta
    with pytest.raises(RuntimeError, match="Expected a Module"):
        lib.nn.utils.skip_init(dict)
    lib.manual_seed(0)
    conv, bn = lib.nn.Conv2d(2, 3, 3).eval(), lib.nn.BatchNorm2d(3).eval()
    with lib.no_grad():
        bn.running_mean.uniform_()
        bn.running_var.uniform_(0.5, 1.5)
    x = lib.randn(1, 2, 5, 5)
    assert lib.allclose(lib.nn.utils.fuse_conv_bn_eval(conv, bn)(x), bn(conv(x)), atol=1e-5)
    linear, bn1 = lib.nn.Linear(3, 3).eval(), lib.nn.BatchNorm1d(3).eval()
    y = lib.ones(2, 3)
    assert lib.allclose(lib.nn.utils.fuse_linear_bn_eval(linear, bn1)(y), bn1(linear(y)), atol=1e-5)


@LIBS
def test_make_tensor(lib):
    make_tensor = lib.testing.make_tensor
    t = make_tensor((2, 3), dtype=lib.float32, device="cpu", low=-1, high=1, requires_grad=True)
    assert t.shape == (2, 3) and t.requires_grad and bool(((t >= -1) & (t < 1)).all())
    i = make_tensor(50, dtype=lib.int64, device="cpu", exclude_zero=True)
    assert i.dtype == lib.int64 and bool(((i >= -9) & (i < 10) & (i != 0)).all())
    assert make_tensor(4, 2, dtype=lib.float32, device="cpu", noncontiguous=True).stride() == (4, 2)
    with pytest.raises(ValueError, match="`low` must be less than `high`, but got 2 >= 1"):
        make_tensor(3, dtype=lib.float32, device="cpu", low=2, high=1)
    with pytest.raises(ValueError, match="requires_grad=True` is not supported"):
        make_tensor(3, dtype=lib.int32, device="cpu", requires_grad=True)
    with pytest.raises(TypeError, match="dtype"):
        make_tensor((2,))


@LIBS
def test_sym_helpers_and_cond(lib):
    assert (lib.sym_int(3.7), lib.sym_int(-3.7), lib.sym_float(2), lib.sym_max(1, 2.0), lib.sym_min(1, 2)) == \
        (3, -3, 2.0, 2.0, 1)
    assert lib.sym_not(True) is False and lib.sym_ite(True, 1, 2) == 1 and lib.sym_sum([1, 2, 3]) == 6
    assert lib.cond(lib.tensor(0.0), lambda x: x + 1, lambda x: x - 1, [lib.zeros(1)]).tolist() == [-1.0]
    assert lib.cond(True, lambda x: x + 1, lambda x: x - 1, (lib.zeros(1),)).tolist() == [1.0]
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        lib.cond(lib.tensor([True, False]), lambda: 1, lambda: 2)


@LIBS
def test_tensor_lr_steps_and_stays_a_tensor(lib):
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.AdamW([p], lr=lib.tensor(0.1))
    sched = lib.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    for _ in range(3):
        p.grad = lib.ones(1)
        opt.step()
        sched.step()
    assert round(p.item(), 4) == -0.1749 and float(opt.param_groups[0]["lr"]) == pytest.approx(0.0125)
    assert isinstance(lib.optim.SGD([p], lr=lib.tensor(0.1)).param_groups[0]["lr"], lib.Tensor)


# ------------------------------------------------------------------ torch.compile(module), bare decorators, devices
@LIBS
def test_compile_module_returns_optimized_module(lib):
    m = lib.nn.Linear(2, 2)
    compiled = lib.compile(m)
    assert type(compiled).__name__ == "OptimizedModule" and compiled._orig_mod is m
    assert isinstance(compiled, lib.nn.Module) and not isinstance(compiled, lib.nn.Linear)
    assert compiled.weight is m.weight and compiled.in_features == 2
    assert list(compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert lib.equal(compiled(lib.ones(1, 2)), m(lib.ones(1, 2)))
    assert repr(compiled) == "OptimizedModule(\n  (_orig_mod): " + repr(m) + "\n)"
    assert lib.compile(m, disable=True) is m and m.compile() is None
    compiled.eval()
    assert m.training is False


@LIBS
def test_grad_modes_decorate_without_parentheses(lib):
    x = lib.ones(1, requires_grad=True)

    @lib.no_grad
    def off(t):
        return t * 2

    @lib.enable_grad
    def on(t):
        return t * 2
    with lib.no_grad():
        assert on(x).requires_grad is True
    assert off(x).requires_grad is False and off.__name__ == "off"


@LIBS
def test_unknown_device_is_a_runtime_error(lib):
    with pytest.raises(RuntimeError):
        lib.device("tpu")
    with pytest.raises(RuntimeError):
        lib.zeros(1, device="tpu")


def test_compiler_config_module_paths_under_as_torch():
    """`import torch._dynamo.config` and `from torch._dynamo.eval_frame import OptimizedModule` under as_torch
    (a fresh interpreter: as_torch changes what `import torch` means)."""
    import os
    import subprocess
    import sys
    code = ("import webgrad; webgrad.as_torch()\n"
            "import torch, torch._dynamo.config as c, torch._inductor.config as ic\n"
            "from torch._dynamo.eval_frame import OptimizedModule\n"
            "c.suppress_errors = True\n"
            "assert torch._dynamo.config.suppress_errors is True and ic.fx_graph_cache is True\n"
            "assert isinstance(torch.compile(torch.nn.ReLU()), OptimizedModule)\n")
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "package")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=package))
    assert done.returncode == 0, done.stderr


@LIBS
def test_checkpoint_asks_for_use_reentrant(lib):
    from importlib import import_module
    checkpoint = import_module(lib.__name__ + ".utils.checkpoint")
    x = lib.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint.checkpoint(lambda t: t * 2, x)
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter"):
        checkpoint.checkpoint_sequential(lib.nn.Sequential(lib.nn.ReLU()), 1, x)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = checkpoint.checkpoint(lambda t: t.sin(), x, use_reentrant=False)
    y.sum().backward()
    assert lib.allclose(x.grad, lib.ones(2).cos())


# ------------------------------------------------------------------ torch._foreach_*
@LIBS
def test_foreach_ops_as_ema_and_clipping_code_calls_them(lib):
    ema, model = [lib.zeros(3), lib.zeros(2)], [lib.ones(3), lib.full((2,), 3.0)]
    assert lib._foreach_lerp_(ema, model, 0.5) is ema
    assert [t.tolist() for t in ema] == [[0.5] * 3, [1.5] * 2]
    lib._foreach_mul_(ema, 2.0)
    lib._foreach_add_(ema, model, alpha=-1)
    assert [t.tolist() for t in ema] == [[0.0] * 3, [0.0] * 2]
    norms = lib._foreach_norm(model)
    assert isinstance(norms, tuple) and [round(n.item(), 4) for n in norms] == [1.7321, 4.2426]
    out = lib._foreach_addcdiv(model, model, [lib.full((3,), 2.0), lib.full((2,), 2.0)], value=2)
    assert [t.tolist() for t in out] == [[2.0] * 3, [6.0] * 2]
    assert [t.tolist() for t in lib._foreach_pow(2.0, [lib.ones(1)])] == [[2.0]]
    assert [t.tolist() for t in lib._foreach_sqrt([lib.full((1,), 4.0)])] == [[2.0]]
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 1 and 2"):
        lib._foreach_add([lib.ones(1)], [lib.ones(1), lib.ones(1)])
    with pytest.raises(RuntimeError, match="Tensor list must have at least one tensor"):
        lib._foreach_add([], 1.0)
