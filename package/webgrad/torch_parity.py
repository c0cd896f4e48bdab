"""`python -m webgrad.torch_parity`: the torch.compile parity harness, as the issue names it (the harness
itself is webgrad.torch_backend.parity: eager PyTorch against backend="webgrad", report and JSON)."""

from webgrad.torch_backend.parity import main

if __name__ == "__main__":
    raise SystemExit(main())
