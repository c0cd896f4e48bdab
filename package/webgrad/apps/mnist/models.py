"""The dashboard's two models and its model files. The models are webgrad.examples.models' (the ones the
example script, the benchmarks and the notebooks train), so a file saved by any of them loads here and
the dashboard's exports load there, and in the same torch.nn.Sequential.

`load_model(data, device)` is what the page's "Import" calls: it reads a .safetensors file, finds which
model the tensors belong to, and returns that model with the weights in it.
"""

import io

import webgrad as wg
from webgrad.examples.models import MODELS

NAMES = {"mlp": "MLP 784-128-10", "cnn": "CNN conv16-pool-conv32-pool-fc"}


def build(kind, device=None):
    """A freshly initialised model (PyTorch's default initialisation) on `device`."""
    if kind not in MODELS:
        raise ValueError(f"unknown model {kind!r}: choose one of {', '.join(NAMES)}")
    return MODELS[kind](device=device)


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


def load_model(data, device=None, name="file"):
    """(kind, model) from the bytes of a .safetensors file holding the weights of one of the models.
    ValueError says what is wrong: not a safetensors file, or tensors that fit neither model."""
    try:
        state = wg.load(io.BytesIO(bytes(data)), device=device)
    except ValueError as e:  # the file's own fault: say what is wrong with it
        raise ValueError(f"{name} is not a valid .safetensors file: {e}") from None
    found = {k: tuple(v.shape) for k, v in state.items()}
    expected = {}
    for kind in NAMES:
        model = build(kind, device)
        expected[kind] = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        renames = _match(found, expected[kind])
        if renames is not None:
            model.load_state_dict({renames[k]: v for k, v in state.items()})
            return kind, model
    listing = ", ".join(f"{k} {list(s)}" for k, s in sorted(found.items(), key=lambda kv: _layer_order(kv[0])))
    raise ValueError(f"the weights in {name} fit neither model (the file holds {listing or 'no tensors'}); "
                     f"expected the tensors of the MLP ({', '.join(expected['mlp'])}) or of the CNN "
                     f"({', '.join(expected['cnn'])})")
