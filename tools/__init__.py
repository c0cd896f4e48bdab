"""Repo tooling (stdlib only): set-up shared by serve.py and tests/run.py."""
