"""The dashboard's models and its model files. The models are webgrad.models' (the MLP and the CNN are the
ones the example script, the benchmarks and the notebooks train), built for the dataset's input size and
class count: on MNIST a file saved by any of them loads here, the dashboard's exports load there, and
every export loads into the same networks built with torch.nn (webgrad.models' builders with nn=torch.nn).

`load_model(data, device, name, shape, classes)` is what the page's "Import" calls: it reads a
.safetensors (or PyTorch .pt) file, finds which model (for the current dataset's input size and classes) the
tensors belong to, and returns that model with the weights in it.

For the Text dataset the models are GPTs (webgrad.models.gpt, nanoGPT's decoder) of the sizes in GPT_SIZES,
over the text's vocabulary. A GPT's export carries its config and vocabulary in the file's metadata
(gpt_metadata), so that `webgrad.models.gpt.define(torch.nn).GPT(GPTConfig(**config))` takes its weights and
`load_gpt` checks an import against the text in the page.
"""

import dataclasses
import io
import json
import re

import webgrad as wg
from webgrad import models as zoo
from webgrad.io import safetensors
from webgrad.models.gpt import GPTConfig

NAMES = {"mlp": "MLP 784-128-10", "cnn": "CNN conv16-pool-conv32-pool-fc", "resnet8": "ResNet-8",
         "resnet18": "ResNet-18"}
MNIST_SHAPE = zoo.MNIST_SHAPE

# GPTs for the Text dataset: (layers, heads, width, context in tokens). Head sizes are multiples of 4 (the fused
# attention's vectors). Their activations fit a 128 MiB buffer (WebGPU's smallest maxStorageBufferBindingSize)
# at batch 64 and below; check_gpt_fits says when a batch does not.
GPT_SIZES = {
    "gpt-tiny": dict(n_layer=2, n_head=4, n_embd=64, block_size=32),
    "gpt-small": dict(n_layer=4, n_head=4, n_embd=128, block_size=64),
    "gpt-medium": dict(n_layer=6, n_head=8, n_embd=256, block_size=128),
    "gpt-6x384": dict(n_layer=6, n_head=6, n_embd=384, block_size=256),  # nanoGPT's Shakespeare-char model
}
GPT_TITLES = {"gpt-tiny": "GPT tiny", "gpt-small": "GPT small", "gpt-medium": "GPT medium",
              "gpt-6x384": "GPT 6x384, nanoGPT's", "gpt": "GPT"}


def gpt_config(kind, vocab_size):
    return GPTConfig(vocab_size=vocab_size, dropout=0.0, **GPT_SIZES[kind])


def gpt_parameters(config):
    """The parameter count of a GPT of `config` (the token embedding counted once: lm_head shares it)."""
    d, bias = config.n_embd, int(config.bias)
    # a block: c_attn 3d^2, c_proj d^2, c_fc 4d^2, the MLP's c_proj 4d^2, two LayerNorm gains 2d; biases 11d
    block = 12 * d * d + 2 * d + bias * 11 * d
    return config.n_layer * block + (config.vocab_size + config.block_size) * d + d * (1 + bias)


def describe_gpt(kind, config):
    """e.g. "GPT tiny: 2 layers of width 64, 4 heads, 32-token context (0.11M parameters)"."""
    n = gpt_parameters(config)
    count = f"{n / 1e6:.2f}M" if n < 1e7 else f"{n / 1e6:.1f}M"
    return (f"{GPT_TITLES.get(kind, 'GPT')}: {config.n_layer} layers of width {config.n_embd}, {config.n_head} heads, "
            f"{config.block_size}-token context ({count} parameters)")


def gpt_choices(vocab_size):
    """[(kind, label, description)] of the GPTs for a text of `vocab_size` tokens (the page's model picker), e.g.
    ("gpt-tiny", "GPT tiny (0.11M parameters)", "2 layers of width 64, 4 heads, 32-token context")."""
    out = []
    for kind in GPT_SIZES:
        title, _, rest = describe_gpt(kind, gpt_config(kind, vocab_size)).partition(": ")
        shape, _, count = rest.rpartition(" (")
        out.append((kind, f"{title} ({count}", shape))
    return out


def check_gpt_fits(config, batch_size, limit):
    """None, or why a step of `batch_size` sequences does not fit buffers of `limit` bytes (None: no limit)."""
    if limit is None:
        return None
    t, d = config.block_size, config.n_embd
    biggest = max((4 * d * batch_size * t, "its MLP's activations"), (config.vocab_size * batch_size * t, "its logits"),
                  (config.n_head * batch_size * t * t, "its attention scores"))
    need = 4 * biggest[0]
    if need <= limit:
        return None
    return (f"batch_size: {batch_size} sequences of {t} tokens need {need / 2 ** 20:.0f} MiB in one GPU buffer for "
            f"{biggest[1]}, and this GPU allows {limit / 2 ** 20:.0f} MiB per buffer (maxStorageBufferBindingSize): "
            "use a smaller batch or a smaller model")


def describe(kind, shape=MNIST_SHAPE, classes=10, config=None):
    """The model's name as the page shows it, e.g. "MLP 3072-128-10"; a GPT's from its config (or its size and
    `classes`, the vocabulary's size)."""
    if is_gpt(kind):
        return describe_gpt(kind, config or gpt_config(kind, classes))
    c, h, w = shape
    if kind == "mlp":
        return f"MLP {c * h * w}-128-{classes}"
    if kind == "cnn" and (tuple(shape), classes) == (MNIST_SHAPE, 10):
        return NAMES[kind]
    if kind == "cnn":
        return f"CNN conv16-pool-conv32-pool-fc ({c}x{h}x{w} -> {classes})"
    return f"{NAMES[kind]} ({c}x{h}x{w} -> {classes} classes)"


def is_gpt(kind):
    return isinstance(kind, str) and (kind in GPT_SIZES or kind == "gpt")


def build(kind, device=None, shape=MNIST_SHAPE, classes=10):
    """A freshly initialised model (PyTorch's default initialisation; a GPT's is GPT-2's) on `device` for inputs
    of `shape` (C, H, W) and `classes` classes (for a GPT: the vocabulary's size; shape is not used)."""
    if kind in GPT_SIZES:
        config = gpt_config(kind, classes)
        return zoo.get_model("gpt", input_shape=(config.block_size,), num_classes=classes, n_layer=config.n_layer,
                             n_head=config.n_head, n_embd=config.n_embd, dropout=0.0, device=device)
    if kind not in NAMES:
        raise ValueError(f"unknown model {kind!r}: choose one of {', '.join(NAMES)}")
    return zoo.get_model(kind, input_shape=tuple(shape), num_classes=classes, device=device)


def gpt_kind(config):
    """The page's name of a GPT of `config`: one of GPT_SIZES, or "gpt" (another shape, e.g. an import)."""
    for kind, size in GPT_SIZES.items():
        if all(getattr(config, k) == v for k, v in size.items()) and config.bias:
            return kind
    return "gpt"


def gpt_metadata(model, kind, text):
    """The safetensors metadata of a GPT's export: its config (GPTConfig's fields, JSON), the page's name of its
    size, and the vocabulary it reads (`text`: the page's TextData)."""
    return {"format": "webgrad-gpt", "model": kind, "config": json.dumps(dataclasses.asdict(model.config)),
            "tokens": text.kind, "vocab": json.dumps(text.vocab, ensure_ascii=False)}


_LAYER = re.compile(r"^transformer\.h\.(\d+)\.")


def load_gpt(data, device, name, text):
    """(kind, model) from the bytes of a .safetensors (or .pt) file of a GPT's weights (nanoGPT's names) for the
    text in the page (`text`: TextData); ValueError says what does not fit."""
    raw = bytes(data)
    meta = {}
    try:
        state = wg.load(io.BytesIO(raw), device=device)
        if not raw.startswith(b"PK"):
            meta = safetensors.parse(raw)[1] or {}
    except ValueError as e:
        raise ValueError(f"{name} is not a valid .safetensors or PyTorch file: {e}") from None
    if not isinstance(state, dict) or not all(isinstance(v, wg.Tensor) for v in state.values()):
        raise ValueError(f"{name} does not hold a state_dict (a flat dict of tensors)")
    state = {k.removeprefix("_orig_mod."): v for k, v in state.items()}  # a torch.compile'd model's names
    wte, wpe = state.get("transformer.wte.weight"), state.get("transformer.wpe.weight")
    if wte is None or wpe is None or wte.dim() != 2 or wpe.dim() != 2:
        listing = ", ".join(sorted(state)[:6]) or "no tensors"
        raise ValueError(f"the weights in {name} are not a GPT's (the file holds {listing}…); for the Text dataset "
                         "the page imports GPT weights with nanoGPT's names (transformer.wte.weight, "
                         "transformer.wpe.weight, transformer.h.0.attn.c_attn.weight, …)")
    vocab_size, n_embd = wte.shape
    layers = {int(m.group(1)) for k in state if (m := _LAYER.match(k))}
    n_layer = max(layers) + 1 if layers else 0
    saved = _json(meta, "config", name)
    if saved is not None:
        try:
            config = GPTConfig(**{k: saved[k] for k in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd",
                                                         "bias")})
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{name}: its metadata's GPT config is not usable ({e})") from None
    else:  # a file of another program: the shapes tell all but the heads, which a known size or head size 64 gives
        bias = "transformer.ln_f.bias" in state
        config = GPTConfig(block_size=wpe.shape[0], vocab_size=vocab_size, n_layer=max(n_layer, 1), n_head=1,
                           n_embd=n_embd, bias=bias)
        known = [size["n_head"] for size in GPT_SIZES.values()
                 if (size["n_layer"], size["n_embd"], size["block_size"]) == (n_layer, n_embd, wpe.shape[0])]
        heads = known[0] if known else (n_embd // 64 if n_embd % 64 == 0 else None)
        if heads is None:
            raise ValueError(f"{name} has no metadata saying how many attention heads its GPT has, and its width "
                             f"({n_embd}) is not a multiple of 64: export it from this page, or with "
                             "metadata={'config': json.dumps(dataclasses.asdict(config))}")
        config.n_head = heads
    if config.vocab_size != len(text.vocab):
        raise ValueError(f"the GPT in {name} reads {config.vocab_size} tokens and the text in the page has "
                         f"{len(text.vocab)} ({text.kind}): load the text it was trained on first")
    vocab = _json(meta, "vocab", name)
    if vocab is not None and (vocab != text.vocab or meta.get("tokens", text.kind) != text.kind):
        raise ValueError(f"the GPT in {name} was trained on a text with other {meta.get('tokens', 'characters')} "
                         f"than {text.label}: load the text it was trained on first")
    state.setdefault("lm_head.weight", wte)  # tied to the token embedding; some exports keep one name only
    model = zoo.get_model("gpt", input_shape=(config.block_size,), num_classes=config.vocab_size,
                          n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd, bias=config.bias,
                          dropout=0.0, device=device)
    try:
        model.load_state_dict(state)
    except (KeyError, RuntimeError, ValueError) as e:
        raise ValueError(f"the weights in {name} do not fit a GPT of {config.n_layer} layers of width "
                         f"{config.n_embd}: {e}") from None
    return gpt_kind(config), model


def _json(meta, key, name):
    text = meta.get(key)
    if text is None:
        return None
    if safetensors.json_depth(text.encode("utf-8", "surrogatepass")) > 8:
        raise ValueError(f"{name}: its metadata's {key!r} nests too deep for a GPT's {key}")
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"{name}: its metadata's {key!r} is not valid JSON") from None


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
