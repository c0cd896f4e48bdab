"""torch.backends.cpu: the CPU's vector capability as ATen dispatches on it; webgrad's CPU code is NumPy's, so
"DEFAULT" (no capability of its own picked)."""


def get_cpu_capability():
    return "DEFAULT"
