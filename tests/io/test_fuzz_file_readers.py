"""Seeded fuzzing of the checkpoint readers (tools/fuzz_readers.py; docs/FUZZING.md has the longer local run):
2,000 mutated or crafted files each, and every outcome is a value that passes the reader's checks (and equals
what the reference reader gives: torch.load for .pt, the safetensors package) or the reader's one documented
exception. Never another exception, never a wrong value, never a broken process."""

import pytest

from tools.fuzz_readers import TARGETS, fuzz, table

INPUTS = 2000


@pytest.mark.parametrize("reader", ["safetensors", "pt", "app"])
def test_every_outcome_is_a_value_or_the_documented_error(reader):
    report = fuzz(reader, INPUTS, seed="ci")
    print("\n" + table([report]))
    problems = [f"{kind} {reader}:{i}: {detail}" for kind in ("unclean", "silent")
                for i, detail in report.examples[kind][:10]]
    assert not problems, "\n".join(problems) + f"\n(reproduce: python -m tools.fuzz_readers --seed ci --reproduce " \
                                                f"{reader}:I)"
    assert report.inputs == INPUTS
    # both sides of each reader were exercised
    assert report.counts["value"] >= 50 and report.counts["refused"] >= INPUTS // 2, report.counts


def test_the_documented_types():
    from webgrad.apps.mnist.checkpoint import CheckpointError
    from webgrad.io import torch_format
    assert TARGETS["pt"]().documented() == (torch_format.UnpicklingError,)
    assert TARGETS["safetensors"]().documented() == (ValueError,)
    assert TARGETS["app"]().documented() == (CheckpointError,)
