"""torch.profiler and torch.autograd.profiler (webgrad/profiler/) against PyTorch's on one small MLP: the op
names where webgrad has torch's, their call counts, nesting, self <= total, input shapes, the bytes ops
allocate, the table's columns, the Chrome trace, schedules and their errors."""

import gzip
import json
import os
import subprocess
import sys
import warnings

import pytest

import webgrad
from webgrad import profiler as wprof
from webgrad._backends import kernels

from helpers import DEVICES

torch = pytest.importorskip("torch")
import torch.profiler as tprof  # noqa: E402

BACKWARD = "autograd::engine::evaluate_function: "


def _mlp(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))


def _profile_mlp(lib, prof_module, device="cpu", **options):
    model = _mlp(lib).to(device)
    x = lib.randn(3, 4).to(device)
    with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU], **options) as prof:
        with prof_module.record_function("model_inference"):
            y = model(x)
        y.sum().backward()
    return prof


@pytest.fixture(scope="module")
def both():
    """(webgrad's profile, torch's profile) of the same forward and backward, shapes and memory recorded."""
    return (_profile_mlp(webgrad, wprof, record_shapes=True, profile_memory=True),
            _profile_mlp(torch, tprof, record_shapes=True, profile_memory=True))


def _counts(prof):
    return {a.key: a.count for a in prof.key_averages()}


# Ops webgrad records under torch's names (instrument.py), and the backward nodes torch's engine names alike.
SHARED = ["model_inference", "aten::linear", "aten::relu", "aten::sum", BACKWARD + "AddmmBackward0",
          "AddmmBackward0", BACKWARD + "ReluBackward0", "ReluBackward0", BACKWARD + "SumBackward0", "SumBackward0"]


def test_the_ops_and_backward_nodes_torch_records_are_recorded_as_often(both):
    ours, theirs = _counts(both[0]), _counts(both[1])
    for name in SHARED:
        assert name in ours and name in theirs, name
        assert ours[name] == theirs[name], (name, ours[name], theirs[name])
    assert ours["aten::linear"] == 2 and ours[BACKWARD + "AddmmBackward0"] == 2


def test_nesting_is_torch_s(both):
    for prof in both:
        events = prof.events()
        parent_of = {}
        for e in events:
            parent_of.setdefault(e.name, set()).add(e.cpu_parent.name if e.cpu_parent is not None else None)
        assert parent_of["aten::linear"] == {"model_inference"}
        assert parent_of["aten::relu"] == {"model_inference"}
        assert parent_of["model_inference"] == {None}
        assert parent_of["AddmmBackward0"] == {BACKWARD + "AddmmBackward0"}
    # webgrad's kernels run inside the ops that call them
    kernel_parents = {e.cpu_parent.name for e in both[0].events() if e.name == "webgrad::matmul"}
    assert "aten::linear" in kernel_parents and "AddmmBackward0" in kernel_parents


def test_children_lie_within_parents_and_self_time_never_exceeds_total(both):
    ours = both[0]
    for e in ours.events():
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total
        for child in e.cpu_children:
            assert child.cpu_parent is e
            assert e.time_range.start <= child.time_range.start <= child.time_range.end <= e.time_range.end
    for a in ours.key_averages():
        assert 0 <= a.self_cpu_time_total <= a.cpu_time_total
        assert a.cpu_time == pytest.approx(a.cpu_time_total / a.count)
    total = ours.key_averages().total_average()
    assert total.key == "Total" and total.count == len(ours.events())
    assert total.self_cpu_time_total == pytest.approx(ours.events().self_cpu_time_total)


def test_input_shapes_and_allocated_bytes_match_torch(both):
    def linear_rows(prof):
        return {str(a.input_shapes): (a.count, a.cpu_memory_usage)
                for a in prof.key_averages(group_by_input_shape=True) if a.key == "aten::linear"}
    assert linear_rows(both[0]) == linear_rows(both[1]) == {"[[3, 4], [8, 4], [8]]": (1, 96),
                                                          "[[3, 8], [2, 8], [2]]": (1, 24)}
    relu = [(e.input_shapes, e.cpu_memory_usage) for p in both for e in p.events() if e.name == "aten::relu"]
    assert relu == [([[3, 8]], 96), ([[3, 8]], 96)]
    # views allocate nothing
    x = webgrad.randn(4, 6)
    with wprof.profile(profile_memory=True) as prof:
        x.view(6, 4)
        x.t()
    assert all(e.cpu_memory_usage == 0 for e in prof.events())


def _header(table):
    import re
    return [h for h in re.split(r"\s{2,}", table.splitlines()[1].strip()) if h]


def test_the_table_has_torch_s_columns_and_rows(both):
    ours, theirs = both
    for kwargs in ({}, {"group_by_input_shape": True}):
        mine = ours.key_averages(**kwargs).table(sort_by="cpu_time_total", row_limit=5)
        reference = theirs.key_averages(**kwargs).table(sort_by="cpu_time_total", row_limit=5)
        assert _header(mine) == _header(reference)
        assert len(mine.splitlines()) == len(reference.splitlines())
        assert mine.splitlines()[-1].startswith("Self CPU time total: ")
    plain = _profile_mlp(webgrad, wprof)
    assert _header(plain.key_averages().table()) == _header(_profile_mlp(torch, tprof).key_averages().table())
    averages = ours.key_averages()
    lines = averages.table(sort_by="self_cpu_time_total", row_limit=3).splitlines()
    top = max(averages, key=lambda a: a.self_cpu_time_total).key
    assert lines[3].strip().startswith(top[:50]) and lines[6].startswith("-")  # three rows, the largest first
    lines = averages.table(header="a header").splitlines()
    assert set(lines[0]) == {"="} and lines[1] == "a header" and _header("\n".join(lines[2:]))[0] == "Name"


def test_unknown_sort_key_raises_torch_s_error(both):
    for prof in both:
        with pytest.raises(AttributeError, match="'FunctionEventAvg' object has no attribute 'bogus'"):
            prof.key_averages().table(sort_by="bogus")


def test_chrome_trace_parses(both, tmp_path):
    path = tmp_path / "trace.json"
    both[0].export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert len(events) == len(both[0].events())
    assert all(e["ph"] == "X" and e["dur"] >= 0 and {"name", "ts", "pid", "tid", "cat"} <= set(e) for e in events)
    linear = [e for e in events if e["name"] == "aten::linear"]
    assert linear[0]["args"]["Input Dims"] == [[3, 4], [8, 4], [8]] and linear[0]["cat"] == "cpu_op"
    assert {e["cat"] for e in events} == {"cpu_op", "kernel", "user_annotation"}
    both[0].export_chrome_trace(str(tmp_path / "trace.json.gz"))
    with gzip.open(tmp_path / "trace.json.gz", "rt") as f:
        assert len(json.load(f)["traceEvents"]) == len(events)


@pytest.mark.parametrize("kwargs", [dict(wait=1, warmup=1, active=2), dict(wait=1, warmup=1, active=2, repeat=1),
                                    dict(wait=0, warmup=2, active=1, repeat=2, skip_first=3),
                                    dict(wait=3, warmup=1, active=1, skip_first=2, skip_first_wait=1)])
def test_schedule_actions_are_torch_s(kwargs):
    ours, theirs = wprof.schedule(**kwargs), tprof.schedule(**kwargs)
    assert [ours(s).name for s in range(16)] == [theirs(s).name for s in range(16)]


def test_bad_schedules_raise_as_torch():
    for kwargs in (dict(wait=-1, warmup=1, active=1), dict(wait=0, warmup=1, active=0),
                   dict(wait=0, warmup=1, active=1, repeat=-1)):
        with pytest.raises(AssertionError) as ours:
            wprof.schedule(**kwargs)
        with pytest.raises(AssertionError) as theirs:
            tprof.schedule(**kwargs)
        assert str(ours.value) == str(theirs.value)
    with pytest.warns(UserWarning, match="won't be using warmup"):
        wprof.schedule(wait=1, warmup=0, active=1)
    with pytest.raises(TypeError):
        wprof.schedule(1, 1, 1)  # keyword-only, as torch's


def _scheduled_run(lib, prof_module, steps, **schedule_args):
    """What on_trace_ready saw at each call: the step, and the ProfilerStep ranges in the trace."""
    seen = []

    def ready(prof):
        seen.append((prof.step_num, sorted((e.name, e.trace_name) for e in prof.events()
                                           if e.name.startswith("ProfilerStep"))))
    x = lib.ones(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU], on_trace_ready=ready,
                                 schedule=prof_module.schedule(**schedule_args)) as prof:
            for _ in range(steps):
                (x * 2).sum()
                prof.step()
    return seen


@pytest.mark.parametrize("steps, kwargs", [(8, dict(wait=1, warmup=1, active=2, repeat=2)),
                                           (5, dict(wait=1, warmup=1, active=2)),
                                           (3, dict(wait=0, warmup=1, active=3))])
def test_scheduled_profiles_hand_over_the_cycles_torch_does(steps, kwargs):
    ours = _scheduled_run(webgrad, wprof, steps, **kwargs)
    assert ours == _scheduled_run(torch, tprof, steps, **kwargs)
    assert ours  # every case completes at least one cycle


def test_tensorboard_trace_handler_writes_a_trace_file(tmp_path):
    x = webgrad.ones(3)
    with wprof.profile(schedule=wprof.schedule(wait=0, warmup=1, active=1),
                       on_trace_ready=wprof.tensorboard_trace_handler(str(tmp_path / "log"), "worker0")) as prof:
        for _ in range(2):
            (x + 1).sum()
            prof.step()
    files = os.listdir(tmp_path / "log")
    assert len(files) == 1 and files[0].startswith("worker0.") and files[0].endswith(".pt.trace.json")
    names = {e["name"] for e in json.loads((tmp_path / "log" / files[0]).read_text())["traceEvents"]}
    assert {"ProfilerStep#1", "aten::add", "aten::sum"} <= names


def test_start_stop_and_record_function_as_decorator():
    @wprof.record_function("my_step")
    def step(x):
        return (x * 3).sum()
    x = webgrad.ones(4)
    assert step(x).item() == 12.0  # outside a profile it only runs the function
    prof = wprof.profile()
    prof.start()
    step(x)
    step(x)
    prof.stop()
    counts = {a.key: a.count for a in prof.key_averages()}
    assert counts["my_step"] == 2 and counts["aten::mul"] == 2
    assert {e.cpu_parent.name for e in prof.events() if e.name == "aten::mul"} == {"my_step"}


def test_nothing_stays_instrumented_after_a_profile():
    plus, add, linear = webgrad.Tensor.__add__, webgrad.add, webgrad.nn.functional.linear
    sgd_step, conv = vars(webgrad.optim.SGD)["step"], vars(webgrad.nn.Conv2d)["_function"]
    with pytest.raises(ValueError):
        with wprof.profile():
            assert webgrad.Tensor.__add__ is not plus and webgrad.add is not add  # wrapped while recording
            assert vars(webgrad.optim.SGD)["step"] is not sgd_step
            raise ValueError("inside")
    assert kernels.PROFILER is None and webgrad._autograd.PROFILER is None
    assert webgrad.Tensor.__add__ is plus and webgrad.add is add and webgrad.nn.functional.linear is linear
    assert vars(webgrad.optim.SGD)["step"] is sgd_step and vars(webgrad.nn.Conv2d)["_function"] is conv
    with wprof.profile():
        with pytest.raises(RuntimeError, match="already enabled"):
            wprof.profile().start()


def test_autograd_profiler_as_torch_s():
    x = webgrad.randn(3, 3, requires_grad=True)
    prof = webgrad.autograd.profiler.profile(record_shapes=True)
    with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
        prof.key_averages()
    with pytest.warns(FutureWarning):
        webgrad.autograd.profiler.profile(use_cuda=True)
    with prof:
        with webgrad.autograd.profiler.record_function("region"):
            (x @ x).sum().backward()
    names = {a.key for a in prof.key_averages()}
    assert {"region", "aten::matmul", "aten::sum", BACKWARD + "SumBackward0"} <= names
    assert isinstance(prof.function_events, webgrad.autograd.profiler.EventList)
    assert prof.self_cpu_time_total == pytest.approx(prof.function_events.self_cpu_time_total)
    assert "Self CPU time total" in prof.table(sort_by="self_cpu_time_total") and str(prof)
    with webgrad.autograd.profiler.emit_nvtx():
        pass
    with webgrad.autograd.profiler.profile(enabled=False) as off:
        x.sum()
    assert off.function_events is None


def test_import_paths_under_as_torch():
    script = ("import webgrad; webgrad.as_torch()\n"
              "import torch, torch.profiler, torch.autograd.profiler\n"
              "from torch.profiler import profile, record_function, ProfilerActivity, schedule, "
              "tensorboard_trace_handler\n"
              "assert torch.profiler is webgrad.profiler and torch.autograd.profiler is webgrad.autograd.profiler\n"
              "from torch.autograd.profiler_util import EventList, FunctionEvent\n"
              "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:\n"
              "    torch.ones(2).add(1)\n"
              "print(sorted(a.key for a in p.key_averages()))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "package"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "aten::add" in out.stdout


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
def test_webgpu_ops_are_recorded_with_device_memory():
    prof = _profile_mlp(webgrad, wprof, device="webgpu", record_shapes=True, profile_memory=True)
    counts = _counts(prof)
    assert counts["aten::linear"] == 2 and counts["ReluBackward0"] == 1 and counts["webgrad::matmul"] >= 2
    linear = [e for e in prof.events() if e.name == "aten::linear"][0]
    assert linear.device_memory_usage == 96 and linear.cpu_memory_usage == 0 and linear.device_time_total == 0
    prof_cuda = wprof.profile(activities=[wprof.ProfilerActivity.CPU, wprof.ProfilerActivity.CUDA],
                              profile_memory=True)
    x = webgrad.randn(8, 8, device="webgpu")
    with prof_cuda:
        (x @ x).relu()
    assert "CUDA Mem" in _header(prof_cuda.key_averages().table())


def test_with_stack_records_each_op_s_caller(tmp_path):
    # (torch 2.13's kineto profiler records the Python frames as events of their own and leaves event.stack
    # empty; webgrad keeps the documented form: each op's stack, innermost first, torch's "file(line): name")
    x = webgrad.ones(3)
    with wprof.profile(with_stack=True) as prof:
        x.add(1)
        x.add(2)
    rows = {k: sum(a.key == "aten::add" for a in prof.key_averages(group_by_stack_n=k)) for k in (0, 1)}
    assert rows == {0: 1, 1: 2}  # one row per name; one per call site when grouped by the innermost frame
    add = [e for e in prof.events() if e.name == "aten::add"][0]
    assert add.stack[0].startswith(__file__ + "(")
    assert add.stack[0].endswith(": test_with_stack_records_each_op_s_caller")
    table = prof.key_averages(group_by_stack_n=1).table(sort_by="self_cpu_time_total")
    assert _header(table)[-1] == "Source Location" and "test_with_stack_records_each_op_s_caller" in table
    prof.export_stacks(str(tmp_path / "stacks"), "self_cpu_time_total")
    lines = (tmp_path / "stacks").read_text().splitlines()
    assert 1 <= len(lines) <= 2 and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert all(line.split(" ")[0].endswith(":_test_with_stack_records_each_op_s_caller") for line in lines)
    with pytest.raises(ValueError, match="metric should be one of"):
        prof.export_stacks(str(tmp_path / "x"), "cpu_time")
    plain = wprof.profile()
    with plain:
        webgrad.ones(2).add(1)
    with pytest.raises(AssertionError, match="requires with_stack=True"):
        plain.export_stacks(str(tmp_path / "x"))


def _cnn_step(lib, prof_module):
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(2 * 3 * 3, 4), nn.Softmax(dim=1))
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = lib.randn(2, 1, 8, 8)
    with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU]) as prof:
        opt.zero_grad()
        with prof_module.record_function("forward"):
            out = model(x)
        out.sum().backward()
        opt.step()
    events = prof.events()
    return ([e.name for e in events if e.cpu_parent is not None and e.cpu_parent.name == "forward"],
            sorted(e.name for e in events if e.name.startswith("Optimizer.")))


def test_a_cnn_training_step_shows_torch_s_ops_and_optimizer_ranges():
    ours, theirs = _cnn_step(webgrad, wprof), _cnn_step(torch, tprof)
    # torch's BatchNorm counts num_batches_tracked with an add_ of its own (webgrad's kernel counts it), and
    # webgrad's Sequential runs a ReLU followed by a max pooling as the pooling then the ReLU (the same values,
    # a quarter of the ReLU's work: nn/container.py)
    assert sorted(ours[0]) == sorted(name for name in theirs[0] if name != "aten::add_")
    assert ours[0] == ["aten::conv2d", "aten::batch_norm", "aten::max_pool2d", "aten::relu", "aten::flatten",
                       "aten::linear", "aten::softmax"]
    assert ours[1] == theirs[1] == ["Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"]


def test_profiles_without_numpy(tmp_path):
    """As in Pyodide: no NumPy, ops on WebGPU (where an adapter exists here)."""
    script = ("import sys\n"
              "class Block:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name == 'numpy' or name.startswith('numpy.'):\n"
              "            raise ImportError('numpy blocked for this test')\n"
              "sys.meta_path.insert(0, Block())\n"
              "import json, webgrad\n"
              "from webgrad.profiler import profile, record_function\n"
              "with profile(record_shapes=True, profile_memory=True) as prof:\n"
              "    with record_function('step'):\n"
              "        if webgrad.webgpu.is_available():\n"
              "            x = webgrad.tensor([1.0, 2.0], device='webgpu', requires_grad=True)\n"
              "            (x * x).sum().backward()\n"
              "names = {a.key for a in prof.key_averages()}\n"
              "assert 'step' in names and (not webgrad.webgpu.is_available() or 'aten::mul' in names), names\n"
              "print(prof.key_averages().table(sort_by='cpu_time_total'))\n"
              f"prof.export_chrome_trace({str(tmp_path / 'trace.json')!r})\n"
              f"json.load(open({str(tmp_path / 'trace.json')!r}))\n"
              "print('profiled without numpy')\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "package"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "profiled without numpy" in out.stdout and "Self CPU time total" in out.stdout


def _creation_and_read_back(lib, prof_module):
    with prof_module.profile() as prof:
        x = lib.zeros(3, 4)
        y = lib.randn(3, 4).float()
        (x + y).sum().item()
        lib.ones_like(x).to(lib.float64)
    return sorted(e.name for e in prof.events() if e.cpu_parent is None)


def test_creation_conversion_and_read_back_are_torch_s_ops():
    ours = _creation_and_read_back(webgrad, wprof)
    assert ours == _creation_and_read_back(torch, tprof)
    assert ours == ["aten::add", "aten::item", "aten::ones_like", "aten::randn", "aten::sum", "aten::to",
                    "aten::to", "aten::zeros"]
