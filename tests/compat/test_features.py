"""FEATURES.md is the table tools/features.py makes from the installed torch and webgrad: it cannot drift."""

import pytest

pytest.importorskip("torch")

from tools import features  # noqa: E402


def test_features_md_is_up_to_date():
    assert features.OUT.read_text(encoding="utf-8") == features.table(), \
        "FEATURES.md is out of date: run python -m tools.features"


def test_a_supported_name_is_really_there():
    text = features.table()
    assert "| `torch.nn.functional.elu` | supported |" in text  # from the op table
    assert "| `torch.optim.LBFGS` | supported |" in text
    assert "| `torch.nn.Conv2d` | partial | groups > 1" in text
