"""Backends: the device interface (device.py) and its implementations (cpu.py, webgpu/)."""
