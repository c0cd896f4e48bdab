"""When a scheduled profile records: ProfilerAction, and schedule() (torch.profiler.schedule's steps)."""

import enum
import warnings


class ProfilerAction(enum.Enum):
    """What the profiler does at a step: nothing, warm up (not kept), record, or record and hand the trace to
    on_trace_ready at the end of the step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The profiler's action at each step: skip the first `skip_first` steps, then cycles of `wait` idle steps,
    `warmup` steps, `active` recorded steps (the last one RECORD_AND_SAVE), `repeat` times (0: until the
    profile ends). `skip_first_wait` != 0 leaves out the first cycle's wait."""
    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), "
            f"active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    return schedule_fn


def default_schedule(step):
    """A profile without a schedule records from start() to stop()."""
    return ProfilerAction.RECORD
