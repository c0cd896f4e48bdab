"""webgrad.bench.replay_profile (python -m webgrad.bench replay), natively: the pieces its report is made of.
The same code runs in Pyodide on Dawn (tools/bench_dawn.py --profile); figures are never asserted on."""

import pytest

from helpers import webgpu_available

pytestmark = pytest.mark.skipif(not webgpu_available(), reason="needs the native WebGPU binding")


def test_replay_profile_pieces_on_a_recorded_mlp_step():
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad.bench import replay_profile as rp

    rt = default_runtime()
    run, inputs = rp.record_step("mlp", 2)
    records = run.graph.records
    dispatches, copies, passes = rp.shape(records)
    assert dispatches == run.graph.dispatches and copies == len(records) - dispatches and 1 <= passes <= dispatches

    prepared = rt.binding.prepare(records)
    span = rp.gpu_times(rt, records, prepared, "span", 2)
    each = rp.gpu_times(rt, records, prepared, "each", 2)
    assert len(span) == 2 and all(len(rep) == 1 and rep[0] > 0 for rep in span)
    assert len(each) == 2 and all(len(rep) == dispatches for rep in each)

    host, in_submit, submits = rp.host_split(run, inputs, steps=3)
    assert submits == 1.0 and 0 < in_submit <= host  # a replay is one submit
    assert type(rt.binding).submit is rt.binding.submit.__func__  # the timer's wrapper is gone again
    assert all(t >= 0 for t in rp.submit_parts(rt, records, prepared, n=2))
    loop, read = rp.loop_and_read(run, inputs, steps=10)
    assert loop > 0 and read > 0
    stalls = rp.read_stalls(run, inputs, 1, per=2)
    assert [len(v) for v in stalls.values()] == [1, 1]
    labels = [rp.label(d) for d in rt.describe(records)]
    optimizer = sum(1 for name in labels if "optim:" in name)
    kept, without = rp.span_without(rt, records, labels, "optim:", 2)
    assert optimizer > 0 and kept == len(records) - optimizer and without > 0
    run.release()


def test_replay_profile_records_the_amp_step():
    """--amp: the step of bench train --amp (autocast to float16, a GradScaler) is what gets recorded."""
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad.bench import replay_profile as rp

    rt = default_runtime()
    if not rt.has_f16:
        pytest.skip("the adapter has no shader-f16")
    run, _ = rp.record_step("mlp", 2, amp=True)
    entries = [d.kernel.entry for d in rt.describe(run.graph.records) if d.kernel]
    assert "unscale_check6" in entries and any(e.startswith("h_from_f") for e in entries)
    run.release()


def test_replay_profile_records_a_gpt_step_with_either_attention():
    """The GPT rows are bench scale's models and step; --attention manual records the hand-written attention
    (the masked softmax), sdpa F.scaled_dot_product_attention."""
    from webgrad._backends.webgpu.runtime import default_runtime
    from webgrad.bench import replay_profile as rp

    rt = default_runtime()
    run, (idx, targets) = rp.record_step("gpt-6x384", 1, attention="manual")
    assert tuple(idx.shape) == tuple(targets.shape) == (1, 256)
    entries = [d.kernel.entry for d in rt.describe(run.graph.records) if d.kernel]
    assert any(e.startswith("softmax_masked") for e in entries)
    assert not any(e.startswith("attention_") for e in entries)
    run.release()
