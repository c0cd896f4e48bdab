"""The two models the page offers, as PyTorch would write them, so exported weights load in PyTorch.

Both are plain nn.Sequential stacks: their state_dict keys are the layer indices ("0.weight", ...),
exactly the names torch.nn.Sequential gives the same stack.
"""

from webgrad import nn

NAMES = {"mlp": "MLP 784-128-10", "cnn": "CNN conv16-pool-conv32-pool-fc"}
# The shape one sample has when it enters the model (the data is stored flat, [N, 784]).
INPUT_SHAPE = {"mlp": (784,), "cnn": (1, 28, 28)}


def build(kind, device=None):
    """A freshly initialised model (PyTorch's default initialisation), its parameters made on `device`."""
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 128, device=device), nn.ReLU(), nn.Linear(128, 10, device=device))
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 14 x 14
            nn.Conv2d(16, 32, 3, padding=1, device=device), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 7 x 7
            nn.Flatten(), nn.Linear(32 * 7 * 7, 10, device=device),
        )
    raise ValueError(f"unknown model {kind!r}: choose one of {', '.join(NAMES)}")


def shapes(kind):
    """{state_dict key: shape} of a model kind, without building it on any device."""
    if kind == "mlp":
        return {"0.weight": (128, 784), "0.bias": (128,), "2.weight": (10, 128), "2.bias": (10,)}
    return {"0.weight": (16, 1, 3, 3), "0.bias": (16,), "3.weight": (32, 16, 3, 3), "3.bias": (32,),
            "7.weight": (10, 1568), "7.bias": (10,)}


def detect(state):
    """The model kind whose parameters `state` ({name: tensor}) holds, or a ValueError saying why none."""
    found = {k: tuple(v.shape) for k, v in state.items()}
    for kind in NAMES:
        if found == shapes(kind):
            return kind
    listing = ", ".join(f"{k} {list(s)}" for k, s in sorted(found.items())) or "no tensors"
    raise ValueError(f"these weights fit neither model (the file holds {listing}); expected the tensors of "
                     f"the MLP ({', '.join(shapes('mlp'))}) or of the CNN ({', '.join(shapes('cnn'))})")
