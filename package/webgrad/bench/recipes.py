"""What the benchmarks train: the models (webgrad.models' builders, at their default input shapes and 10
classes), grouped as the tables group them, and each one's optimizer, batches and training step.

  MNIST_MODELS        the MLP 784-128-10 and the small CNN of the reference recipe: Adam, lr 1e-3
  SCALE_MODELS        the wide MLP 3072-4096-4096-10 and ResNet-18 (CIFAR variant) on 3x32x32: SGD, lr 0.01,
                      momentum 0.9 (the usual ResNet-on-CIFAR recipe)
  TRANSFORMER_MODELS  one transformer encoder block over 128 x 256 sequences: trains as the scale models do
  GPT_MODELS          nanoGPT's decoder (webgrad.models.gpt), dropout 0, trained as nanoGPT's train.py does:
                      AdamW, lr 6e-4, betas (0.9, 0.95), weight decay 0.1 on the matrices only
                        gpt-6x384   6 layers, width 384, 8 heads, 256 tokens, 65 symbols (Shakespeare's characters)
                        gpt2-small  GPT-2 small: 12 layers, width 768, 12 heads, 1,024 tokens, 50,257 tokens
                      and a Llama-style decoder (webgrad.models.llama: RMSNorm, rotary embeddings, SwiGLU), trained
                      the same way:
                        llama-8x512 8 layers, width 512, 8 heads, 256 tokens, 32,000 tokens

Each is a name -> builder table; a builder called with no argument builds webgrad's model, with nn=torch.nn
PyTorch's, the same layers under the same names (a GPT builder also takes flash=False: the hand-written
attention). INPUT_SHAPES is one sample's shape per model (a GPT's: its tokens).
"""

import functools

from webgrad import models

MNIST_MODELS = {name: models.MODELS[name] for name in ("mlp", "cnn")}
SCALE_MODELS = {name: models.MODELS[name] for name in ("widemlp", "resnet18")}
TRANSFORMER_MODELS = {"transformer": models.MODELS["transformer"]}
GPT_CONFIGS = {
    "gpt-6x384": dict(input_shape=(256,), num_classes=65, n_layer=6, n_head=8, n_embd=384),
    "gpt2-small": dict(input_shape=(1024,), num_classes=50257, n_layer=12, n_head=12, n_embd=768),
}
GPT_MODELS = {name: functools.partial(models.gpt, **config) for name, config in GPT_CONFIGS.items()}


def _llama(flash=True, **options):
    """The Llama-style row's builder: its attention is F.scaled_dot_product_attention only."""
    if not flash:
        raise ValueError("llama-8x512 has no hand-written attention form: leave --attention at sdpa")
    return models.llama(**options)


# Decoder language models beyond nanoGPT's, trained as the GPTs (they share GPT_MODELS' tables; `--models gpt`
# names the two GPT rows only)
GPT_CONFIGS["llama-8x512"] = dict(input_shape=(256,), num_classes=32000, n_layer=8, n_head=8, n_embd=512)
GPT_MODELS["llama-8x512"] = functools.partial(_llama, **GPT_CONFIGS["llama-8x512"])
INPUT_SHAPES = {name: models.INPUT_SHAPES[name] for name in (*MNIST_MODELS, *SCALE_MODELS, *TRANSFORMER_MODELS)}
INPUT_SHAPES.update({name: config["input_shape"] for name, config in GPT_CONFIGS.items()})
CLASSES = 10  # of the classifiers' random labels


def benchmark_optimizer(model_name, params, optim, **options):
    """The optimizer of `model_name`'s benchmark recipe, from `optim` (webgrad.optim or torch.optim), with
    `options` added (fused=True for torch's)."""
    if model_name in GPT_MODELS:  # nanoGPT's configure_optimizers: no decay on biases and LayerNorm gains
        params = list(params)
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), **options)
    if model_name in SCALE_MODELS or model_name in TRANSFORMER_MODELS:
        return optim.SGD(params, lr=0.01, momentum=0.9, **options)
    return optim.Adam(params, lr=1e-3, **options)


def benchmark_batches(model_name, lib, batch, device, count=4):
    """`count` random (input, target) batches for `model_name` from `lib` (webgrad or torch) on `device`: images
    and labels, or a GPT's tokens and next tokens."""
    if model_name in GPT_MODELS:
        vocab, (tokens,) = GPT_CONFIGS[model_name]["num_classes"], INPUT_SHAPES[model_name]
        return [(lib.randint(0, vocab, (batch, tokens), device=device),
                 lib.randint(0, vocab, (batch, tokens), device=device)) for _ in range(count)]
    shape = INPUT_SHAPES[model_name]
    return [(lib.rand(batch, *shape, device=device), lib.randint(0, CLASSES, (batch,), device=device))
            for _ in range(count)]


def benchmark_step(model_name, model, optimizer, lib, amp=None, replay=False):
    """webgrad.models.train_step of `model_name`'s model: a classifier's output against its labels, a GPT's loss
    from its own forward (nanoGPT's model(idx, targets) -> (logits, loss))."""
    if model_name in GPT_MODELS:
        return models.train_step(_tokens, optimizer, lambda idx, targets: model(idx, targets)[1], amp=amp,
                                 replay=replay, lib=lib)
    return models.train_step(model, optimizer, amp=amp, replay=replay, lib=lib)


def _tokens(idx):  # a GPT's "model" for train_step: the tokens go to the loss, which runs the model
    return idx
