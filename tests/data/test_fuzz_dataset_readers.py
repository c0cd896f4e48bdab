"""Seeded fuzzing of the dataset readers (tools/fuzz_readers.py; docs/FUZZING.md has the longer local run):
2,000 mutated or crafted inputs each (IDX files plain and gzipped, CIFAR batches binary, pickled and in a
.tar.gz, image folders), and every outcome is a dataset that passes the reader's checks or the reader's one
documented exception: ValueError for MNIST and CIFAR files, FileNotFoundError for a folder without one usable
image. Never another exception, never a wrong dataset, never a broken process."""

import pytest

from tools.fuzz_readers import TARGETS, fuzz, table

INPUTS = 2000


@pytest.mark.parametrize("reader", ["idx", "cifar", "images"])
def test_every_outcome_is_a_dataset_or_the_documented_error(reader):
    if reader == "images":
        pytest.importorskip("PIL")
    report = fuzz(reader, INPUTS, seed="ci")
    print("\n" + table([report]))
    problems = [f"{kind} {reader}:{i}: {detail}" for kind in ("unclean", "silent")
                for i, detail in report.examples[kind][:10]]
    assert not problems, "\n".join(problems) + f"\n(reproduce: python -m tools.fuzz_readers --seed ci --reproduce " \
                                                f"{reader}:I)"
    assert report.inputs == INPUTS
    assert report.counts["value"] >= 50 and report.counts["refused"] >= 200, report.counts


def test_the_documented_types():
    assert TARGETS["idx"]().documented() == (ValueError,)
    assert TARGETS["cifar"]().documented() == (ValueError,)
