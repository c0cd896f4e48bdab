"""Backends: the device interface (interface.py), the kernel registry (kernels.py) and the implementations
(cpu/, webgpu/)."""
