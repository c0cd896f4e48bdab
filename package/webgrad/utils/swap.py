"""torch.utils.swap_tensors: two Python tensors exchange everything they are, in place, so every reference to
either (an optimizer's parameter list, a module attribute) sees the other's class, values and attributes."""

import weakref

from .._tensor import Tensor


def _slots(cls):
    """Every slot a tensor of `cls` has (its own and its bases'), but the weak-reference slot."""
    names = [name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())
             if name not in ("__weakref__", "__dict__")]
    return list(dict.fromkeys(names))  # once each: a subclass may name its base's slots again


def swap_tensors(t1, t2):
    """Swap t1 and t2 as PyTorch's torch.utils.swap_tensors: their class, __dict__, slots and data. As there,
    tensors that something holds weakly (a weakref would see the other tensor) or of classes with different
    slots cannot be swapped."""
    if not isinstance(t1, Tensor) or not isinstance(t2, Tensor):
        raise TypeError(f"swap_tensors(): expected two Tensors, got {type(t1).__name__} and {type(t2).__name__}")
    for name, t in (("t1", t1), ("t2", t2)):
        if weakref.getweakrefcount(t):
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    slots1, slots2 = _slots(type(t1)), _slots(type(t2))
    if set(slots1) != set(slots2):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    if type(t1).__basicsize__ != type(t2).__basicsize__ or hasattr(t1, "__dict__") != hasattr(t2, "__dict__"):
        # PyTorch swaps the C++ objects too; Python can change the class of an object only for one of the same
        # layout (a plain Tensor has slots only, a Parameter a __dict__ as well)
        raise RuntimeError(f"Cannot swap t1 and t2: webgrad cannot turn a {type(t1).__name__} into a "
                           f"{type(t2).__name__} in place (their Python layouts differ)")
    for name in slots1:
        missing = object()
        a, b = getattr(t1, name, missing), getattr(t2, name, missing)
        for t, value in ((t1, b), (t2, a)):
            if value is missing:
                delattr(t, name)
            else:
                object.__setattr__(t, name, value)
    has1, has2 = hasattr(t1, "__dict__"), hasattr(t2, "__dict__")
    if has1 and has2:
        d1, d2 = dict(t1.__dict__), dict(t2.__dict__)
        t1.__dict__.clear()
        t1.__dict__.update(d2)
        t2.__dict__.clear()
        t2.__dict__.update(d1)
    if type(t1) is not type(t2):
        t1.__class__, t2.__class__ = type(t2), type(t1)
