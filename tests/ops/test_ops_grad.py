"""Finite-difference gradient checks for every differentiable op, on every device."""

import functools

import pytest

import webgrad
import webgrad.nn.functional as F
from helpers import gradcheck
from op_cases import CASES, make_inputs


@pytest.mark.parametrize("name,fn,specs", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, specs, device):
    gradcheck(functools.partial(fn, webgrad, F), *make_inputs(specs), device=device)
