"""The models by name, for the dashboard, the benchmarks and the examples to look up.

MODELS maps a name to its builder and INPUT_SHAPES to the shape of one sample it takes by default (channels
first). Every builder is called as `builder(input_shape=..., num_classes=..., device=..., nn=...)`, each
argument optional: `nn` is the namespace it builds with (webgrad.nn by default; torch.nn gives the same
network in PyTorch, with the same state_dict names). A module adds its builders with `@register(name,
input_shape)` and is imported by webgrad/models/__init__.py. get_model and list_models are
torchvision.models' names for the lookups.
"""

MNIST_SHAPE = (1, 28, 28)
CIFAR_SHAPE = (3, 32, 32)

MODELS = {}  # name -> builder
INPUT_SHAPES = {}  # name -> one sample's default shape


def register(name, input_shape):
    """Decorator: adds the builder to MODELS as `name`, taking samples of `input_shape` by default."""
    def add(builder):
        if name in MODELS:
            raise ValueError(f"a model named {name!r} is registered already ({MODELS[name].__module__})")
        MODELS[name] = builder
        INPUT_SHAPES[name] = tuple(input_shape)
        return builder
    return add


def list_models():
    """The registered names, sorted (torchvision.models.list_models)."""
    return sorted(MODELS)


def get_model(name, **config):
    """The model `name`, freshly initialised: its builder called with `config` (input_shape, num_classes,
    device, nn and the builder's own options). ValueError for a name that is not registered."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}: choose one of {', '.join(sorted(MODELS))}")
    return MODELS[name](**config)


def image_shape(input_shape, model):
    """(channels, height, width) of `input_shape`, checked: a ValueError names `model` and the shape."""
    shape = tuple(input_shape)
    if len(shape) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise ValueError(f"{model} takes images: input_shape must be (channels, height, width) of positive "
                         f"whole numbers, got {input_shape!r}")
    return shape


def check_classes(num_classes, model):
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"{model}: num_classes must be a positive whole number, got {num_classes!r}")
    return num_classes
