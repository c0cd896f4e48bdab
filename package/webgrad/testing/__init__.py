"""Tools that measure webgrad against PyTorch: its OpInfo operator database and real scripts."""
