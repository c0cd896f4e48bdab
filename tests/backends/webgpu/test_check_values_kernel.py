"""The check_values kernel (value_checks.wgsl) against the CPU's reference, and device_error_flag: which inputs
fail each check (dtypes, strided views, bounds between float32 values or beyond the int32 range), that WebGPU
reports at the next read-back and records into a replay, and the flag the optimizer's updates take."""

import math

import numpy as np
import pytest

import webgrad as wg
from webgrad._backends import kernels
from helpers import webgpu_available

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs a WebGPU adapter")


def _outcome(device, x, **checks):
    """None where the check passes, else the message it raises (on WebGPU at the read-back that follows)."""
    backend = wg.device(device).backend
    try:
        kernels.check_values(backend, x.to(device)._view, "high {value} of {size}", RuntimeError,
                             below_message="low {value} of {size}", **checks)
        wg.webgpu.synchronize()
    except RuntimeError as e:
        return str(e)
    return None


CASES = [
    ([0.0, 0.5, 1.0], "float32", dict(low=0.0, high=1.0)),
    ([0.0, 0.5, 1.0000001], "float32", dict(low=0.0, high=1.0)),
    ([-1e-30, 0.5], "float32", dict(low=0.0, high=1.0)),
    ([0.5, math.nan], "float32", dict(low=0.0, high=1.0)),
    ([0.5, math.nan], "float32", dict(nan=True)),
    ([0.5, math.inf], "float32", dict(nan=True)),
    ([0.5, math.inf], "float32", dict(high=math.inf)),
    ([-math.inf, 2.0], "float32", dict(low=-math.inf)),
    ([0.1, 0.2], "float32", dict(low=0.1)),  # the bound in float32, as torch compares x >= 0.1
    ([0.3, 0.2], "float32", dict(high=0.3)),
    ([0.30000002, 0.2], "float32", dict(high=0.3)),
    ([1.0, 2.0], "float32", dict(high=1e39)),  # beyond float32: infinity
    ([2.0, 0.0], "float32", dict(zero=True)),
    ([2.0, -0.0], "float32", dict(zero=True)),
    ([3, 0, 1], "int64", dict(low=0, high=2)),
    ([3, 0, 1], "int64", dict(low=0, high=3)),
    ([-1, 0], "int64", dict(low=0, high=9)),
    ([5, 7], "int32", dict(low=-2 ** 40, high=2 ** 40)),
    ([5, 7], "int32", dict(low=2 ** 40)),  # no int32 value is that large: every element fails
    ([5, 7], "int32", dict(high=-2 ** 40)),
    ([5, 7], "int32", dict(low=4.5, high=6.5)),  # fractional bounds on integers: 7 > 6.5
    ([5, 0], "uint8", dict(zero=True)),
    ([5, 250], "uint8", dict(high=200)),
    ([True, False], "bool", dict(zero=True)),
    ([True, True], "bool", dict(zero=True)),
]


@pytest.mark.parametrize("values,dtype,checks", CASES, ids=str)
def test_webgpu_fails_what_the_cpu_fails(values, dtype, checks):
    x = wg.tensor(values, dtype=getattr(wg, dtype))
    want = _outcome("cpu", x, **checks)
    assert _outcome("webgpu", x, **checks) == want


def test_random_inputs_agree_with_the_cpu():
    rng = np.random.default_rng(0)
    for trial in range(40):
        n = int(rng.integers(1, 3000))
        if trial % 2:
            a = rng.integers(-3, 50, n).astype(np.int64)
            checks = dict(low=int(rng.integers(-3, 2)), high=int(rng.integers(40, 60)), zero=bool(trial % 4 == 1))
        else:
            a = rng.uniform(-0.01, 1.01, n).astype(np.float32)
            checks = dict(low=0.0, high=1.0)
        if trial % 5 == 0:
            a = np.clip(a, 1, 48) if a.dtype.kind == "i" else np.clip(a, 0, 1)  # passing ones too
        x = wg.tensor(a)
        got, want = _outcome("webgpu", x, **checks), _outcome("cpu", x, **checks)
        assert (got is None) == (want is None), (trial, got, want)
        if got is not None:  # the position named may differ; it fails, with the message of the check it fails
            kind, position = got.split()[0], int(got.split()[1])
            flat = a.reshape(-1)[position]
            assert not (checks["low"] <= flat <= checks["high"]) or (checks.get("zero") and flat == 0), (trial, got)
            assert kind == ("low" if flat < checks["low"] else "high"), (trial, got)


def test_strided_and_offset_views():
    base = wg.arange(24, device="webgpu").reshape(4, 6)
    assert _outcome("webgpu", base[1:, 2:4].t(), low=8, high=21) is None
    assert _outcome("webgpu", base[1:, 2:4].t(), low=9, high=21) == "low 0 of 6"  # 8 is [0, 0] of the view
    assert _outcome("webgpu", base[::2, ::3], high=12) == "high 3 of 4"  # [[0, 3], [12, 15]]: 15 is the fourth


def test_float16_is_checked_through_float32():
    rt = wg.device("webgpu").backend.runtime
    if not rt.has_f16:
        pytest.skip("the adapter has no shader-f16")
    x = wg.tensor([0.5, 1.5], dtype=wg.float16)
    assert _outcome("webgpu", x, low=0.0, high=1.0) == _outcome("cpu", x, low=0.0, high=1.0) == "high 1 of 2"


def test_reports_at_the_read_back_and_records_into_a_replay():
    backend = wg.device("webgpu").backend
    x = wg.tensor([1, 2, 3], device="webgpu")

    def step(v):
        kernels.check_values(backend, v._view, "bad divisor at {value}", RuntimeError, zero=True)
        return v * 2

    run = wg.replayable(step)
    for values in ([1, 2, 3], [4, 5, 6], [7, 8, 9]):
        assert run(wg.tensor(values, device="webgpu")).tolist() == [2 * v for v in values]
    assert run.replays == 1
    out = run(wg.tensor([1, 0, 3], device="webgpu"))  # a replay: no error yet (no read-back)
    assert run.replays == 2
    with pytest.raises(RuntimeError, match="bad divisor at 1"):
        out.tolist()
    assert run(wg.tensor([5, 5, 5], device="webgpu")).tolist() == [10, 10, 10]  # the word was cleared
    assert x.tolist() == [1, 2, 3]


def _flag(found=None):
    backend = wg.device("webgpu").backend
    out = wg.full((1,), -7.0, device="webgpu")
    kernels.device_error_flag(backend, out._view, None if found is None else wg.tensor([found], device="webgpu")._view)
    return out


def test_the_error_flag_is_the_error_word_with_gradscalers_flag():
    backend = wg.device("webgpu").backend
    wg.webgpu.synchronize()
    assert not backend.errors_pending
    x = wg.tensor([2, 0], device="webgpu")
    kernels.check_values(backend, x._view, "fine", RuntimeError, low=0, high=5)
    assert backend.errors_pending
    flags = [_flag(), _flag(0.0), _flag(1.0)]  # no error
    kernels.check_values(backend, x._view, "a zero at {value}", RuntimeError, zero=True)
    flags += [_flag(), _flag(0.0), _flag(1.0)]  # an error, not raised yet
    with pytest.raises(RuntimeError, match="a zero at 1"):
        wg.webgpu.synchronize()
    assert not backend.errors_pending
    assert [f.item() for f in flags] == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]


def test_a_callbacks_report_raises_no_flag():
    # replayable(check_finite=callback): the callback is called at the read-back and the read goes on, so the
    # optimizer steps are not skipped for it
    backend = wg.device("webgpu").backend
    seen = []
    kernels.check_finite(backend, wg.tensor([math.nan], device="webgpu")._view, "nan", "inf", seen.append)
    flag = _flag()
    assert flag.item() == 0.0 and seen == ["nan"]
