"""Shared test set-up: the source tree on sys.path, the devices to test on, and the checking helpers."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "package"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def webgpu_available():
    try:
        import webgrad.webgpu
        return webgrad.webgpu.is_available()
    except ImportError:
        return False


DEVICES = ["cpu"] + (["webgpu"] if webgpu_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    import webgrad
    webgrad.manual_seed(0)
