"""Host-side costs of an eager (not replayed) training step on WebGPU: a repeated step must find every
WebGPU object it needs in the runtime's caches. In the browser each miss is an FFI call that builds a
JS descriptor (a bind group costs about as much as a dozen ops' Python), so a step that keeps making
new ones is host-bound for no reason."""

import pytest

pytest.importorskip("wgpu")

import webgrad as wg  # noqa: E402
from webgrad._backends.webgpu.memory import BufferPool  # noqa: E402

from helpers import webgpu_available  # noqa: E402

needs_webgpu = pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")


def test_pool_hands_out_the_oldest_free_buffer_whatever_the_release_order():
    made = []
    pool = BufferPool(lambda size: made.append(size) or f"buffer{len(made)}")
    a, b, c = pool.acquire(1000), pool.acquire(1000), pool.acquire(1000)
    for order in ((a, b, c), (c, a, b), (b, c, a)):
        for buffer in order:
            pool.release(buffer)
        again = [pool.acquire(1000) for _ in range(3)]
        assert [x.handle for x in again] == ["buffer1", "buffer2", "buffer3"]  # creation order, every time
    assert len(made) == 3 and pool.allocated == 3 * a.size


@needs_webgpu
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_a_repeated_eager_step_creates_no_webgpu_objects(model):
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad.examples.models import INPUT_SHAPES, MODELS, benchmark_optimizer, training_step

    wg.manual_seed(0)
    net = MODELS[model]().to("webgpu")
    step = training_step(net, benchmark_optimizer(model, net.parameters(), wg.optim))
    batches = [(wg.rand(4, *INPUT_SHAPES[model], device="webgpu"), wg.randint(0, 10, (4,), device="webgpu"))
               for _ in range(2)]
    rt = default_runtime()
    for i in range(6):  # warm-up: the loss kept across steps settles into its buffers after two or three
        loss = step(*batches[i % 2])
    float(loss.item())
    before = dict(rt.stats)
    for i in range(6):
        loss = step(*batches[i % 2])
    float(loss.item())
    made = {k: rt.stats[k] - before[k] for k in ("bind_groups_created", "pipelines_created", "uniforms_created")}
    assert made == dict.fromkeys(made, 0), made
    # The parameters' gradients become their .grad as they are (nobody else holds them): no copies.
    assert rt.stats["copies"] == before["copies"]


@pytest.mark.parametrize("device", ["cpu"] + (["webgpu"] if webgpu_available() else []))
def test_a_gradient_someone_else_holds_is_copied_into_grad(device):
    """backward hands a leaf its gradient without a copy only when nothing else holds the gradient, its
    view or its storage; otherwise .grad is a copy, so changing it in place changes nothing else."""
    a = wg.ones(3, requires_grad=True, device=device)
    (a + a).sum().backward()  # the same gradient object reaches a twice
    assert a.grad.tolist() == [2.0, 2.0, 2.0]

    b = wg.ones(2, 3, requires_grad=True, device=device)
    c = wg.ones(6, requires_grad=True, device=device)
    (b.reshape(6) + c).sum().backward()  # b's gradient is a view of c's
    b.grad.mul_(10)
    assert c.grad.tolist() == [1.0] * 6 and b.grad.tolist() == [[10.0] * 3] * 2

    w = wg.ones(3, requires_grad=True, device=device)
    saved = wg.full((3,), 4.0, device=device)
    (w * saved).sum().backward()
    w.grad.add_(1)
    assert saved.tolist() == [4.0] * 3 and w.grad.tolist() == [5.0] * 3

    x = wg.ones(3, requires_grad=True, device=device)
    y = x * 3
    y.retain_grad()
    (y * 2).sum().backward()
    x.grad.zero_()
    assert y.grad.tolist() == [2.0] * 3 and x.grad.tolist() == [0.0] * 3

    class Twice(wg.autograd.Function):  # one fresh gradient object handed to both inputs
        @staticmethod
        def forward(ctx, u, v):
            return u + v

        @staticmethod
        def backward(ctx, grad):
            h = grad * 2
            return h, h

    u = wg.ones(3, requires_grad=True, device=device)
    v = wg.ones(3, requires_grad=True, device=device)
    Twice.apply(u, v).sum().backward()
    u.grad.mul_(5)
    assert u.grad.tolist() == [10.0] * 3 and v.grad.tolist() == [2.0] * 3

    p = wg.ones(3, requires_grad=True, device=device)
    for _ in range(2):  # the second backward accumulates into the first's .grad
        (p * 2).sum().backward()
    assert p.grad.tolist() == [4.0] * 3


@needs_webgpu
def test_check_view_contiguous_fast_path_keeps_every_check():
    """views.check_view settles contiguous views through a per-shape cache (the common case, ~4x cheaper in
    Pyodide): views reaching outside their storage, negative offsets, empty and non-contiguous views must
    still get the general path's answers."""
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad._backends.webgpu.views import check_view
    from webgrad._view import View

    storage = default_runtime().storage(12, wg.float32)
    ok = View(storage, (3, 4), (4, 1), 0, wg.float32)
    assert check_view(ok, "x", contiguous=True, ndim=2) is ok
    assert check_view(View(storage, (2, 4), (4, 1), 4, wg.float32), "x", contiguous=True) is not None
    for bad in (View(storage, (3, 4), (4, 1), 1, wg.float32), View(storage, (2, 4), (4, 1), -1, wg.float32),
                View(storage, (13,), (1,), 0, wg.float32)):
        with pytest.raises(IndexError, match="reaches outside its storage of 12 elements"):
            check_view(bad, "x")
    assert check_view(View(storage, (0, 4), (4, 1), 50, wg.float32), "x") is not None  # empty: touches nothing
    with pytest.raises(ValueError, match="negative dimension"):
        check_view(View(storage, (-1, -2), (2, 1), 0, wg.float32), "x")
    transposed = View(storage, (4, 3), (1, 4), 0, wg.float32)
    assert check_view(transposed, "x") is transposed and not transposed.is_contiguous()
    with pytest.raises(ValueError, match="must be contiguous"):
        check_view(transposed, "x", contiguous=True)
    assert View(storage, (3, 1, 4), (4, 99, 1), 0, wg.float32).is_contiguous()  # a size-1 dim's stride is free
