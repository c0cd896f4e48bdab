"""The dashboard's models and its model files. The models are webgrad.models' (the MLP and the CNN are the
ones the example script, the benchmarks and the notebooks train), built for the dataset's input size and
class count: on MNIST a file saved by any of them loads here, the dashboard's exports load there, and
every export loads into the same networks built with torch.nn (webgrad.models' builders with nn=torch.nn).

`load_model(data, device, name, shape, classes)` is what the page's "Import" calls: it reads a
.safetensors file, finds which model (for the current dataset's input size and classes) the tensors
belong to, and returns that model with the weights in it.
"""

import io

import webgrad as wg
from webgrad import models as zoo

NAMES = {"mlp": "MLP 784-128-10", "cnn": "CNN conv16-pool-conv32-pool-fc", "resnet8": "ResNet-8",
         "resnet18": "ResNet-18"}
MNIST_SHAPE = zoo.MNIST_SHAPE


def describe(kind, shape=MNIST_SHAPE, classes=10):
    """The model's name as the page shows it, e.g. "MLP 3072-128-10"."""
    c, h, w = shape
    if kind == "mlp":
        return f"MLP {c * h * w}-128-{classes}"
    if kind == "cnn" and (tuple(shape), classes) == (MNIST_SHAPE, 10):
        return NAMES[kind]
    if kind == "cnn":
        return f"CNN conv16-pool-conv32-pool-fc ({c}x{h}x{w} -> {classes})"
    return f"{NAMES[kind]} ({c}x{h}x{w} -> {classes} classes)"


def build(kind, device=None, shape=MNIST_SHAPE, classes=10):
    """A freshly initialised model (PyTorch's default initialisation) on `device` for inputs of `shape`
    (C, H, W) and `classes` classes."""
    if kind not in NAMES:
        raise ValueError(f"unknown model {kind!r}: choose one of {', '.join(NAMES)}")
    return zoo.get_model(kind, input_shape=tuple(shape), num_classes=classes, device=device)


def _layer_order(key):
    """Sort key of a Sequential's state_dict name ("3.weight"): by layer index, then by name."""
    index, _, rest = key.partition(".")
    return (int(index) if index.isdigit() else -1, rest)


def _match(found, expected):
    """{file key: model key} if the file's tensors fit the model, else None. Keys that differ only in the
    layer numbering (the same shapes in the same layer order, e.g. an MLP written without its leading
    Flatten: "0.weight" for "1.weight", as earlier dashboards exported it) are renamed."""
    if found == expected:
        return {k: k for k in found}
    have, want = sorted(found, key=_layer_order), sorted(expected, key=_layer_order)
    if [k.partition(".")[2] for k in have] != [k.partition(".")[2] for k in want]:
        return None  # other parameters (names within the layers differ)
    if [found[k] for k in have] != [expected[k] for k in want]:
        return None
    return dict(zip(have, want))


def load_model(data, device=None, name="file", shape=MNIST_SHAPE, classes=10):
    """(kind, model) from the bytes of a .safetensors file holding the weights of one of the models for
    inputs of `shape` and `classes` classes. ValueError says what is wrong: not a safetensors file, or
    tensors that fit no model."""
    try:
        state = wg.load(io.BytesIO(bytes(data)), device=device)
    except ValueError as e:  # the file's own fault: say what is wrong with it
        raise ValueError(f"{name} is not a valid .safetensors file: {e}") from None
    found = {k: tuple(v.shape) for k, v in state.items()}
    expected = {}
    for kind in NAMES:
        if kind.startswith("resnet") and ("conv1.weight" not in found or
                                          ("layer4.0.conv1.weight" in found) != (kind == "resnet18")):
            continue  # not this ResNet: do not build 11M parameters to find out
        model = build(kind, device, shape, classes)
        expected[kind] = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        renames = _match(found, expected[kind])
        if renames is not None:
            model.load_state_dict({renames[k]: v for k, v in state.items()})
            return kind, model
    listing = ", ".join(f"{k} {list(s)}" for k, s in sorted(found.items(), key=lambda kv: _layer_order(kv[0])))
    if len(listing) > 400:
        listing = listing[:400] + "…"
    c, h, w = shape
    raise ValueError(f"the weights in {name} fit no model of the page (the file holds "
                     f"{listing or 'no tensors'}); for {c}x{h}x{w} inputs and {classes} classes, expected the "
                     f"tensors of the MLP ({', '.join(expected['mlp'])}), of the CNN "
                     f"({', '.join(expected['cnn'])}), or of ResNet-8 or ResNet-18 (conv1.weight, bn1.weight, …)")
