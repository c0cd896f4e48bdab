"""The in-page half of the browser benchmark (`python -m tools.bench_browser`; webgrad.apps.mnist.bench)
runs where the page trains, and gives figures that hang together: a smoke test, so that the benchmark does not rot. The
figures themselves are printed by the benchmark, never asserted on (a shared machine's timings vary)."""


def test_bench_measure_in_the_page(app_page, run_python):
    result = run_python(
        "from webgrad.apps.mnist import bench\n"
        "await bench.measure(app, 'mlp', 32, steps=4, warmup=2, replays=2, profile=True)", 300)
    assert result["model"] == "mlp" and result["batch_size"] == 32 and result["replay"] is True
    for key in ("samples_per_s", "step_ms", "host_ms", "gpu_ms"):
        assert result[key] > 0, key
    assert result["dispatches_per_step"] >= 10  # forward, loss, backward and Adam: a whole step
    kernels = [name for name, _, _ in result["profile"]]
    assert any(name.startswith("matmul") for name in kernels) and any("adam" in name for name in kernels)


def test_bench_measure_eager_steps(app_page, run_python):
    result = run_python(
        "from webgrad.apps.mnist import bench\n"
        "await bench.measure(app, 'cnn', 8, steps=2, warmup=1, replays=1, replay=False)", 300)
    assert result["replay"] is False and result["samples_per_s"] > 0 and result["dispatches_per_step"] >= 20
