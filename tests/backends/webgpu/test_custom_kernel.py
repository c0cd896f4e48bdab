"""webgrad.webgpu.Kernel (user WGSL) and webgrad.autograd.Function, natively through wgpu-py.

The leaky-ReLU kernels are the ones notebooks/03-custom-kernel.ipynb teaches; here they are checked
against a Python reference, differentiated through a Function, captured in a replayed step, and fed
every kind of wrong argument the kernel must refuse with a clear message.
"""

import math

import pytest

import webgrad as wg

FORWARD = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
struct Params { n: u32, alpha: f32 }
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= p.n) { return; }
    y[i] = select(p.alpha * x[i], x[i], x[i] > 0.0);
}
"""
BACKWARD = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
struct Params { n: u32, alpha: f32 }
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= p.n) { return; }
    dx[i] = select(p.alpha, 1.0, x[i] > 0.0) * g[i];
}
"""


@pytest.fixture(scope="module")
def kernels():
    if not wg.webgpu.is_available():
        pytest.skip("no WebGPU adapter (wgpu-py + a Vulkan driver are needed)")
    return (wg.webgpu.Kernel(FORWARD, inputs=1, outputs=1, params="If"),
            wg.webgpu.Kernel(BACKWARD, inputs=2, outputs=1, params="If"))


def leaky_reference(values, alpha):
    return [v if v > 0 else alpha * v for v in values]


def make_function(kernels):
    forward, backward = kernels

    class LeakyReLU(wg.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.save_for_backward(x)
            ctx.alpha = alpha
            n = x.numel()
            return forward([x], [x.shape], grid=-(-n // 64), params=(n, alpha))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            n = x.numel()
            return backward([x, grad], [x.shape], grid=-(-n // 64), params=(n, ctx.alpha)), None

    return LeakyReLU


def test_forward_matches_reference(kernels):
    forward, _ = kernels
    values = [(-1) ** i * (i % 7) * 0.37 for i in range(1000)]  # > one workgroup, not a multiple of 64
    x = wg.tensor(values, device="webgpu")
    y = forward([x], [x.shape], grid=-(-1000 // 64), params=(1000, 0.1))
    assert y.shape == x.shape and y.device.type == "webgpu"
    assert y.tolist() == pytest.approx(leaky_reference(values, 0.1), rel=1e-6)


def test_strided_and_offset_inputs_are_made_dense(kernels):
    forward, _ = kernels
    base = wg.arange(24, dtype=wg.float32, device="webgpu").reshape(4, 6) - 12
    for x in (base.t(), base[1:], base[:, 2:4]):  # transposed, offset, strided
        n = x.numel()
        y = forward([x], [x.shape], grid=-(-n // 64), params=(n, 0.5))
        expected = [leaky_reference(row, 0.5) for row in x.tolist()]
        assert y.tolist() == expected


def test_function_gradient_matches_finite_differences(kernels):
    LeakyReLU = make_function(kernels)
    values = [-1.5, -0.2, 0.3, 2.0, -3.0, 0.7]
    x = wg.tensor(values, device="webgpu", requires_grad=True)
    weights = wg.tensor([1.0, -2.0, 0.5, 3.0, 1.5, -1.0], device="webgpu")
    loss = (LeakyReLU.apply(x, 0.1) * weights).sum()
    loss.backward()
    assert loss.grad_fn is not None
    eps = 1e-3

    def f(vals):
        return sum(w * v for w, v in zip(weights.tolist(), leaky_reference(vals, 0.1)))

    numeric = [(f(values[:i] + [v + eps] + values[i + 1:]) - f(values[:i] + [v - eps] + values[i + 1:])) / (2 * eps)
               for i, v in enumerate(values)]
    assert x.grad.tolist() == pytest.approx(numeric, rel=1e-3, abs=1e-3)


def test_function_inside_a_replayed_training_step(kernels):
    """A custom op joins graph capture: replays compute the same as eager steps."""
    LeakyReLU = make_function(kernels)
    wg.manual_seed(0)
    w = wg.randn(8, device="webgpu", requires_grad=True)
    opt = wg.optim.SGD([w], lr=0.1)

    def step(x):
        loss = LeakyReLU.apply(w * x, 0.2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    replayed = wg.replayable(step)
    x = wg.ones(8, device="webgpu")
    start = w.detach().clone().tolist()
    for _ in range(4):
        replayed(x)
    assert replayed.replays == 2  # warm-up, recording, then two replays
    # every step moves each weight by -lr * d(leaky)/dw (slope 1 above zero, 0.2 below)
    expected = list(start)
    for _ in range(4):
        expected = [v - 0.1 * (1.0 if v > 0 else 0.2) for v in expected]
    assert w.tolist() == pytest.approx(expected, abs=1e-5)


def test_several_outputs_and_int32(kernels):
    source = """
    @group(0) @binding(0) var<storage, read> x: array<i32>;
    @group(0) @binding(1) var<storage, read_write> twice: array<i32>;
    @group(0) @binding(2) var<storage, read_write> half: array<f32>;
    @compute @workgroup_size(1)
    fn main(@builtin(global_invocation_id) id: vec3<u32>) {
        twice[id.x] = 2 * x[id.x];
        half[id.x] = f32(x[id.x]) / 2.0;
    }
    """
    k = wg.webgpu.Kernel(source, inputs=1, outputs=2)
    x = wg.tensor([1, -4, 7], dtype=wg.int32, device="webgpu")
    twice_out = wg.empty(3, dtype=wg.int32, device="webgpu")
    twice, half = k([x], [twice_out, (3,)], grid=3)
    assert twice is twice_out
    assert twice.tolist() == [2, -8, 14] and half.tolist() == [0.5, -2.0, 3.5]


def test_compile_errors_name_the_line(kernels):
    broken = wg.webgpu.Kernel(FORWARD.replace("p.alpha * x[i]", "p.alpha * undefined_name"),
                              inputs=1, outputs=1, params="If")
    x = wg.ones(4, device="webgpu")
    with pytest.raises(Exception, match="undefined_name"):
        broken([x], [x.shape], grid=1, params=(4, 0.1))
        wg.webgpu.synchronize()


@pytest.mark.parametrize("call, message", [
    (lambda k, x: k([x, x], [x.shape], grid=1, params=(4, 0.1)), "takes 1 inputs and 1 outputs"),
    (lambda k, x: k([x], [x.shape], grid=1, params=(4,)), "do not match the format"),
    (lambda k, x: k([x], [x], grid=1, params=(4, 0.1)), "shares memory with an input"),
    (lambda k, x: k([x.cpu()], [x.shape], grid=1, params=(4, 0.1)), "is on cpu"),
    (lambda k, x: k([x.byte()], [x.shape], grid=1, params=(4, 0.1)), "uint8"),
    (lambda k, x: k([x], [x.shape], grid=0, params=(4, 0.1)), "positive workgroup counts"),
    (lambda k, x: k([x], [x.shape], grid=(1, 1, 1, 1), params=(4, 0.1)), "1 to 3"),
    (lambda k, x: k([x], [x.t()[0:1].t()], grid=1, params=(4, 0.1)), "shares memory"),
])
def test_bad_calls_are_refused(kernels, call, message):
    forward, _ = kernels
    x = wg.ones(4, device="webgpu")
    with pytest.raises((ValueError, TypeError), match=message):
        call(forward, x)


def test_bad_definitions_are_refused():
    with pytest.raises(ValueError, match="@compute"):
        wg.webgpu.Kernel("fn main() {}")
    with pytest.raises(ValueError, match="struct characters"):
        wg.webgpu.Kernel(FORWARD, params="Id")
    with pytest.raises(ValueError, match="outputs >= 1"):
        wg.webgpu.Kernel(FORWARD, outputs=0)


def test_function_checks_what_backward_returns():
    class Wrong(wg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad  # one too many

    x = wg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="returned 2 gradients"):
        Wrong.apply(x).sum().backward()


def test_function_on_cpu_records_one_node():
    class Square(wg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = wg.tensor([1.0, -3.0], requires_grad=True)
    y = Square.apply(x)
    assert y.grad_fn.name == "Square"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, -6.0]
    assert not math.isnan(y.sum().item())
