"""Benchmarks: `python -m webgrad.bench <subcommand> [options]` (see `python -m webgrad.bench -h`)."""
