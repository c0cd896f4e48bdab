"""A Llama-style decoder, as Meta's Llama and the models that followed it (Mistral, Qwen) write theirs, defined once
for any `nn` namespace (webgrad.nn or torch.nn), so that a state_dict moves between webgrad and PyTorch by name:
pre-norm blocks with RMSNorm, rotary position embeddings (the real-valued form: q * cos + rotate_half(q) * sin),
causal F.scaled_dot_product_attention, a SwiGLU feed-forward (w2(silu(w1(x)) * w3(x))), no biases, and an output
projection apart from the token embedding. The benchmarks train it beside nanoGPT's decoder (webgrad.models.gpt):
the same kind of model, written with the layers newer scripts use.

    model = llama(input_shape=(256,), num_classes=32000, n_layer=8, n_head=8, n_embd=512)
    logits, loss = model(idx, targets)          # idx, targets: int64 [B, T]
    ref = llama(..., nn=torch.nn)               # the same network in PyTorch

The layers, by state_dict name: tok_embeddings, layers.<i> = Block(attention_norm, attention: Attention(wq, wk, wv,
wo), ffn_norm, feed_forward: FeedForward(w1, w2, w3)), norm, output. The rotary tables are buffers that are not
saved (persistent=False). Weights start as normal(0, 0.02), and each residual projection (wo, w2) as normal(0, 0.02
/ sqrt(2 * n_layer)).
"""

import importlib
import math

import webgrad.nn as _webgrad_nn

from .registry import check_classes, register

_DEFINED = {}  # id(nn namespace) -> its classes


def feed_forward_width(n_embd, multiple_of=32):
    """Llama's SwiGLU width: 2/3 of 4 * n_embd (the same parameters as a GELU MLP of 4 * n_embd), rounded up to a
    multiple of `multiple_of`."""
    hidden = int(2 * 4 * n_embd / 3)
    return multiple_of * -(-hidden // multiple_of)


def define(nn):
    """The classes built from `nn`: a namespace with .Llama, .Block, .Attention and .FeedForward."""
    key = id(nn)
    if key in _DEFINED:
        return _DEFINED[key]
    lib = importlib.import_module(nn.__name__.rpartition(".")[0])
    F = nn.functional

    def rotate_half(x):
        half = x.shape[-1] // 2
        return lib.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Attention(nn.Module):
        def __init__(self, n_embd, n_head, device=None):
            super().__init__()
            self.n_head, self.head_dim = n_head, n_embd // n_head
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(n_embd, n_embd, bias=False, device=device)
                                                  for _ in range(4))

        def forward(self, x, cos, sin):
            B, T, C = x.shape
            q, k, v = (w(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))

    class FeedForward(nn.Module):
        def __init__(self, n_embd, hidden, device=None):
            super().__init__()
            self.w1 = nn.Linear(n_embd, hidden, bias=False, device=device)
            self.w2 = nn.Linear(hidden, n_embd, bias=False, device=device)
            self.w3 = nn.Linear(n_embd, hidden, bias=False, device=device)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head, device=None):
            super().__init__()
            self.attention_norm = nn.RMSNorm(n_embd, eps=1e-5, device=device)
            self.attention = Attention(n_embd, n_head, device)
            self.ffn_norm = nn.RMSNorm(n_embd, eps=1e-5, device=device)
            self.feed_forward = FeedForward(n_embd, feed_forward_width(n_embd), device)

        def forward(self, x, cos, sin):
            x = x + self.attention(self.attention_norm(x), cos, sin)
            return x + self.feed_forward(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, rope_theta=10000.0, device=None):
            super().__init__()
            if n_embd % n_head or (n_embd // n_head) % 2:
                raise ValueError(f"llama: n_embd ({n_embd}) must be n_head ({n_head}) heads of an even width")
            self.vocab_size, self.block_size = vocab_size, block_size
            self.tok_embeddings = nn.Embedding(vocab_size, n_embd, device=device)
            self.layers = nn.ModuleList(Block(n_embd, n_head, device) for _ in range(n_layer))
            self.norm = nn.RMSNorm(n_embd, eps=1e-5, device=device)
            self.output = nn.Linear(n_embd, vocab_size, bias=False, device=device)
            head_dim = n_embd // n_head
            inv_freq = 1.0 / rope_theta ** (lib.arange(0, head_dim, 2, device=device).float() / head_dim)
            angles = lib.outer(lib.arange(block_size, device=device).float(), inv_freq)
            angles = lib.cat((angles, angles), dim=-1)  # [T, head_dim]: rotate_half's pairs (i, i + head_dim / 2)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                    nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets=None):
            T = idx.shape[1]
            if T > self.block_size:
                raise ValueError(f"llama: a sequence of {T} tokens is longer than block_size {self.block_size}")
            x = self.tok_embeddings(idx)
            cos, sin = self.cos[:T], self.sin[:T]
            for layer in self.layers:
                x = layer(x, cos, sin)
            logits = self.output(self.norm(x))
            loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    classes = type("LlamaClasses", (), dict(Llama=Llama, Block=Block, Attention=Attention, FeedForward=FeedForward))
    _DEFINED[key] = classes
    return classes


SEQUENCE_SHAPE = (256,)


@register("llama", SEQUENCE_SHAPE)
def llama(input_shape=SEQUENCE_SHAPE, num_classes=32000, n_layer=8, n_head=8, n_embd=512, device=None, nn=None):
    """A Llama-style decoder over sequences of input_shape[0] tokens from a vocabulary of num_classes (default:
    Llama's 32,000), 8 layers of width 512 with 8 heads by default. nn=torch.nn builds the same network in
    PyTorch."""
    shape = tuple(input_shape)
    if len(shape) != 1 or not isinstance(shape[0], int) or isinstance(shape[0], bool) or shape[0] < 1:
        raise ValueError(f"llama takes token sequences: input_shape must be (block_size,), got {input_shape!r}")
    check_classes(num_classes, "llama")
    return define(nn or _webgrad_nn).Llama(num_classes, shape[0], n_layer, n_head, n_embd, device=device)
