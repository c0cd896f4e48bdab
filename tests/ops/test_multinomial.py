"""multinomial (ops/sampling.py, kernels.multinomial): the same draws on every device from the same generator
state, PyTorch's distribution (chi-square tests at fixed seeds, with and without replacement, the same statistic
for torch's own draws), PyTorch's shapes and errors, and new draws at every replay of a recorded step."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg

from helpers import DEVICES

needs_webgpu = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


def _draw(probs, num_samples, replacement, device, seed=5):
    g = wg.Generator().manual_seed(seed)
    return wg.multinomial(wg.tensor(probs, device=device), num_samples, replacement, generator=g).numpy()


def _chi2_ok(counts, expected):
    """Pearson's chi-square below the 0.999 quantile of its distribution (Wilson-Hilferty)."""
    keep = expected > 0
    assert counts[~keep].sum() == 0, "a category of weight 0 was drawn"
    stat = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    dof = keep.sum() - 1
    limit = dof * (1 - 2 / (9 * dof) + 3.09 * math.sqrt(2 / (9 * dof))) ** 3
    return stat < limit, stat, limit


@needs_webgpu
@pytest.mark.parametrize("rows,n,s,replacement", [
    (3, 10, 4, False), (2, 65, 65, False), (4, 7, 500, True), (2, 50257, 3, True), (2, 1000, 100, False),
    (5, 300, 1, False), (1, 257, 40, True),
])
def test_the_same_draws_on_cpu_and_webgpu(rows, n, s, replacement):
    rng = np.random.default_rng(n)
    probs = (rng.random((rows, n)) ** 4).astype(np.float32)  # from near 0 to 1: many close calls
    probs[:, ::7] = 0.0
    if not replacement:
        probs[:, :s] += 0.01  # enough categories above 0
    cpu, gpu = _draw(probs, s, replacement, "cpu"), _draw(probs, s, replacement, "webgpu")
    np.testing.assert_array_equal(cpu, gpu)
    if not replacement:
        assert all(len(set(row)) == s for row in cpu)


def test_the_distribution_is_torchs(device):
    probs = np.array([0.05, 0.0, 0.4, 0.15, 0.3, 0.1], np.float32) * 3  # unnormalised weights
    draws = _draw(np.tile(probs, (2, 1)), 20000, True, device)
    expected = 20000 * probs / probs.sum()
    for row in draws:
        ok, stat, limit = _chi2_ok(np.bincount(row, minlength=6), expected)
        assert ok, (stat, limit)
    torch.manual_seed(0)  # torch's own draws pass the same test
    theirs = torch.multinomial(torch.from_numpy(probs), 20000, replacement=True).numpy()
    assert _chi2_ok(np.bincount(theirs, minlength=6), expected)[0]


def test_without_replacement_draws_pairs_as_torch(device):
    """Two draws without replacement: P(i then j) = p_i p_j / (1 - p_i), for 4,000 rows at once."""
    p = np.array([0.5, 0.25, 0.15, 0.1], np.float32)
    draws = _draw(np.tile(p, (4000, 1)), 2, False, device)
    assert (draws[:, 0] != draws[:, 1]).all()
    counts = np.bincount(draws[:, 0] * 4 + draws[:, 1], minlength=16)
    expected = np.array([p[i] * p[j] / (1 - p[i]) if i != j else 0.0 for i in range(4) for j in range(4)]) * 4000
    ok, stat, limit = _chi2_ok(counts, expected)
    assert ok, (stat, limit)


def test_shapes_dtypes_and_the_generator(device):
    probs = wg.tensor([0.2, 0.3, 0.5], device=device)
    one = wg.multinomial(probs, 2)
    assert one.dtype is wg.int64 and tuple(one.shape) == (2,)
    assert tuple(probs.expand(4, 3).multinomial(5, replacement=True).shape) == (4, 5)
    wg.manual_seed(7)
    a = wg.multinomial(probs, 3).tolist()
    b = wg.multinomial(probs, 3).tolist()
    wg.manual_seed(7)
    assert wg.multinomial(probs, 3).tolist() == a  # the default generator, from its seed
    assert sorted(a) == sorted(b) == [0, 1, 2]
    draws = [wg.multinomial(probs, 1).item() for _ in range(20)]
    assert len(set(draws)) > 1  # the stream moves on
    # without replacement, once the weighted categories are used up, the others follow (as torch draws them)
    assert sorted(wg.multinomial(wg.tensor([0.0, 1.0, 0.0], device=device), 3).tolist()) == [0, 1, 2]


def test_torchs_errors(device):
    def check(probs, n, match, **kw):
        with pytest.raises(RuntimeError, match=match):
            wg.multinomial(wg.tensor(probs, device=device), n, **kw).tolist()  # (WebGPU: raised at the read-back)
    check([1.0, -1.0], 1, "probability tensor contains either `inf`, `nan` or element < 0")
    check([1.0, float("nan")], 1, "probability tensor contains")
    check([1.0, float("inf")], 1, "probability tensor contains")
    check([0.0, 0.0], 1, r"invalid multinomial distribution \(sum of probabilities <= 0\)")
    check([0.5, 0.5], 3, "cannot sample n_sample > prob_dist.size")
    check([0.5, 0.5], 0, "cannot sample n_sample <= 0 samples")
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        wg.multinomial(wg.ones(2, 2, 2, device=device), 1)
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes for input, got: Long"):
        wg.multinomial(wg.ones(3, dtype=wg.int64, device=device), 1)
    with pytest.raises(TypeError, match="num_samples"):
        wg.multinomial(wg.ones(3, device=device), 1.0)


@needs_webgpu
def test_each_replay_draws_anew_and_as_eager_calls_would():
    probs = wg.tensor([[0.1, 0.2, 0.3, 0.4]] * 8, device="webgpu")
    run = wg.replayable(lambda p: wg.multinomial(p, 2) + 0)
    wg.manual_seed(11)
    replayed = [run(probs).tolist() for _ in range(5)]
    assert run.replays == 3 and replayed[3] != replayed[4]
    wg.manual_seed(11)
    eager = [wg.multinomial(probs, 2).tolist() for _ in range(5)]
    assert replayed == eager
