"""Shared test set-up: the source tree on sys.path, the devices to test on, and the checking helpers."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "package"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


from helpers import DEVICES  # noqa: E402  (tests import helpers, never conftest: e2e/ has one too)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    import webgrad
    webgrad.manual_seed(0)
