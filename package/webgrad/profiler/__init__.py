"""webgrad.profiler, as torch.profiler: where a program's time goes, op by op.

    from torch.profiler import profile, record_function, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        with record_function("model_inference"):
            model(inputs)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

What is recorded (recorder.py): each public op call (``aten::linear``, ``aten::relu``, ...; instrument.py
says which names), each device kernel call inside it (``webgrad::matmul``, ``webgrad::unary(relu)``), each
backward node (``autograd::engine::evaluate_function: AddmmBackward0`` around ``AddmmBackward0``) and each
record_function range, nested as they ran, with host start and end times, input shapes (record_shapes) and
the bytes of the tensors each op created (profile_memory: on the host in the CPU columns, on a WebGPU device
in the device columns; frees are not recorded).

Times are host times only, for every activity. On the WebGPU backend a kernel event is the time to encode
the kernel into the command stream, not its GPU execution (which runs later, batched, and which webgrad's
native runtime cannot time: timestamp queries exist only on the browser's Dawn path, used by
``python -m webgrad.bench replay --profile``); the time an op waits for the GPU appears where it reads a result
back (``.item()``, ``.cpu()``). So ``ProfilerActivity.CUDA`` is accepted and names the device memory columns,
and the ``*device_time*`` fields are 0.
"""

from .events import DeviceType, EventList, FunctionEvent, FunctionEventAvg
from .record_function import record_function
from .profile import ProfilerActivity, profile, supported_activities, tensorboard_trace_handler
from .schedule import ProfilerAction, schedule

__all__ = ["DeviceType", "EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction", "ProfilerActivity",
           "profile", "record_function", "schedule", "supported_activities", "tensorboard_trace_handler"]
