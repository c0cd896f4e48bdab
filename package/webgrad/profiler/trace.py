"""A profile's events as a Chrome trace: JSON ``{"traceEvents": [...]}`` with one complete ("X") event per
range, as torch's export_chrome_trace writes (chrome://tracing, Perfetto and TensorBoard read it)."""

import gzip
import json
import os


def events_json(events):
    """The trace as a dict. Timestamps are microseconds on the wall clock (``baseTimeNanoseconds`` is the
    profile's start), so traces from several processes line up."""
    base_ns = events.metadata.get("baseTimeNanoseconds", 0)
    pid = os.getpid()
    out = []
    for event in events:
        args = {"External id": event.id}
        if event.input_shapes:
            args["Input Dims"] = event.input_shapes
        if event.sequence_nr >= 0:
            args["Sequence number"] = event.sequence_nr
        if event.cpu_memory_usage or event.device_memory_usage:
            args["Allocated bytes"] = event.cpu_memory_usage + event.device_memory_usage
        out.append({"ph": "X", "cat": event.category, "name": event.trace_name, "pid": pid, "tid": event.thread,
                    "ts": base_ns / 1000 + event.time_range.start, "dur": event.time_range.elapsed_us(),
                    "args": args})
    trace = {"schemaVersion": 1, "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns, "traceEvents": out}
    trace.update({k: v for k, v in events.metadata.items() if k != "baseTimeNanoseconds"})
    return trace


def write(events, path):
    text = json.dumps(events_json(events))
    path = os.fspath(path)
    if path.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
