"""Helpers shared by the optimizers composed of tensor ops (adadelta, adagrad, adamax, nadam)."""


def lerp_(start, end, weight):
    """start += weight * (end - start) in place, with PyTorch's formula (the form depends on weight), so
    results agree with torch's lerp_ to the last bit."""
    if weight < 0.5:
        return start.add_((end - start) * weight)
    return start.copy_(end - (end - start) * (1 - weight))
