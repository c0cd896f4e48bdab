"""The text table of a profile's events, with torch's columns, widths and number formats."""

_COLUMN_WIDTH, _SPACING = 12, 2
_TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0}


def _format_time(time_us, unit=None):
    if unit in _TIME_UNITS:
        return f"{time_us / _TIME_UNITS[unit]:.3f}{unit}"
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _format_share(time_us, total_us):
    return "NaN" if total_us == 0 else f"{time_us * 100.0 / total_us:.2f}%"


def _format_memory(nbytes):
    for limit, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if abs(nbytes) >= limit:
            return f"{nbytes / limit:.2f} {unit}"
    return f"{nbytes} B"


def _trim_path(path, width):
    if len(path) > width:
        path = path[len(path) - width:]
        if len(path) > 3:
            path = "..." + path[3:]
    return path


def build(events, sort_by=None, header=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
          max_shapes_column_width=80, profile_memory=False, top_level_events_only=False, time_unit=None):
    """The table torch's EventList.table prints. An unknown `sort_by` raises torch's AttributeError (the
    events have no such attribute)."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        attribute = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        events = sorted(events, key=lambda event: getattr(event, attribute), reverse=True)
    use_device = events[0].use_device
    has_shapes = any(event.input_shapes for event in events)
    has_device_memory = bool(use_device) and any(event.self_device_memory_usage > 0 for event in events)

    name_width = max(len(event.key) for event in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(event.input_shapes)) for event in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)

    device = use_device.upper() if use_device else "None"
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"] + ([f"{device} Mem", f"Self {device} Mem"] if has_device_memory else [])
    headers.append("# of Calls")
    widths = [name_width] + [_COLUMN_WIDTH] * (len(headers) - 1)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
    stacks = [event.stack for event in events if event.stack]
    if stacks:  # (with_stack): the caller's frames, left-aligned, one per line under the row
        source_width = max(len(entry) for stack in stacks for entry in stack) + 4
        if max_src_column_width is not None:
            source_width = min(source_width, max_src_column_width)
        headers.append("Source Location")
        widths.append(source_width)
    row_format = "".join("{: " + ("<" if stacks and i == len(widths) - 1 else ">") + str(width) + "}" + " " * _SPACING
                         for i, width in enumerate(widths))
    separator = "".join("-" * width + " " * _SPACING for width in widths)
    line_length = sum(widths) + _SPACING * (len(widths) - 1)

    total_self = sum(event.self_cpu_time_total for event in events)
    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [separator, row_format.format(*headers), separator]
    shown = 0
    for event in events:
        if shown == row_limit:
            break
        if top_level_events_only and event.cpu_parent is not None:
            continue
        shown += 1
        name = event.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_share(event.self_cpu_time_total, total_self),
               _format_time(event.self_cpu_time_total, time_unit),
               _format_share(event.cpu_time_total, total_self) if not event.is_async else 0,
               _format_time(event.cpu_time_total, time_unit), _format_time(event.cpu_time, time_unit)]
        if profile_memory:
            row += [_format_memory(event.cpu_memory_usage), _format_memory(event.self_cpu_memory_usage)]
            if has_device_memory:
                row += [_format_memory(event.device_memory_usage), _format_memory(event.self_device_memory_usage)]
        row.append(event.count)
        if has_shapes:
            row.append(str(event.input_shapes)[:shapes_width])
        if stacks:
            row.append(_trim_path(event.stack[0], source_width) if event.stack else "")
        lines.append(row_format.format(*row))
        if stacks:
            blank = [""] * (len(headers) - 1)
            lines += [row_format.format(*blank, _trim_path(entry, source_width)) for entry in (event.stack or [])[1:]]
            lines.append(row_format.format(*blank, ""))
    lines += [separator, f"Self CPU time total: {_format_time(total_self, time_unit)}"]
    return "\n".join(lines) + "\n"
