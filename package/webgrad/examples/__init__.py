"""Runnable examples: `python -m webgrad.examples.mnist`."""
