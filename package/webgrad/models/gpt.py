"""A GPT: the decoder of karpathy/nanoGPT's model.py, defined once for any `nn` namespace (webgrad.nn or
torch.nn), so that a state_dict moves between webgrad and PyTorch by name and nanoGPT's checkpoints load.

    config = GPTConfig(vocab_size=65, block_size=256, n_layer=6, n_head=8, n_embd=384)
    model = GPT(config)                                     # webgrad (device=... to build on the GPU)
    logits, loss = model(idx, targets)                      # idx, targets: int64 [B, T]
    out = model.generate(idx, 100, temperature=0.8, top_k=40)
    ref = define(torch.nn).GPT(config)                      # the same network in PyTorch
    ref.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})

The layers, by state_dict name: transformer.wte (token embedding) and transformer.wpe (position embedding),
transformer.drop, transformer.h.<i> = Block(ln_1, attn: CausalSelfAttention(c_attn, c_proj), ln_2, mlp:
MLP(c_fc, GELU, c_proj)), transformer.ln_f, and lm_head, whose weight is wte's (tied, so both names are in the
state_dict, as nanoGPT's). Pre-norm blocks, LayerNorm with an optional bias (`bias`), exact GELU. Weights start
as GPT-2's: normal(0, 0.02), biases zero, and each residual projection (c_proj) normal(0, 0.02 /
sqrt(2 * n_layer)).

Attention: F.scaled_dot_product_attention(is_causal=True) when `flash` (the default, as nanoGPT on PyTorch 2),
else the hand-written form (q @ k^T, masked_fill of a causal mask, softmax, dropout, @ v) over a registered
lower-triangular buffer `bias` (not persistent: the state_dict is the same both ways).

Generation (generate, stream): the last position's logits / temperature, optionally cut to the top_k, softmax,
and one draw with multinomial, all on the model's device. With kv_cache (the default) every layer keeps its keys
and values: the first step runs the prompt, each later step only the new token; a context longer than
block_size is cropped to its last block_size tokens and run again, as nanoGPT's generate does at every step, so
the tokens are the same with or without the cache. On a device that records work (WebGPU), the new tokens are
replays of one recorded decode step (webgrad.replayable) over caches of block_size positions: the position is a
device tensor the step advances, each layer writes its key and value there (index_copy_) and attends over the
whole cache with the later positions masked, and the sampled token goes back in on the device, so a token costs
the host one replay instead of the model's Python (a 6-layer model: ~0.8 ms instead of ~12 ms on lavapipe).
"""

import dataclasses
import importlib
import math

import webgrad.nn as _webgrad_nn

from .registry import check_classes, register


@dataclasses.dataclass
class GPTConfig:
    """nanoGPT's GPTConfig (its defaults: GPT-2 small with the vocabulary padded to 50304)."""
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in the Linears and LayerNorms, as GPT-2; False is a little better and faster

    def __post_init__(self):
        for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig: {name} must be a positive whole number, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must be in [0, 1), got {self.dropout!r}")


_DEFINED = {}  # id(nn namespace) -> its classes (each namespace's are made once)


def _library(nn):
    """The tensor library an nn namespace belongs to (webgrad for webgrad.nn, torch for torch.nn)."""
    return importlib.import_module(nn.__name__.rpartition(".")[0])


def define(nn):
    """The classes built from `nn` (webgrad.nn or torch.nn): a namespace with .GPT, .Block,
    .CausalSelfAttention, .MLP and .LayerNorm."""
    key = id(nn)
    if key in _DEFINED:
        return _DEFINED[key]
    lib = _library(nn)
    F = nn.functional

    class LayerNorm(nn.Module):
        """LayerNorm with an optional bias (nanoGPT's: nn.LayerNorm has no bias=False before PyTorch 2.1)."""

        def __init__(self, ndim, bias, device=None):
            super().__init__()
            self.weight = nn.Parameter(lib.ones(ndim, device=device))
            self.bias = nn.Parameter(lib.zeros(ndim, device=device)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        """Multi-head causal self-attention: one Linear to q, k, v (c_attn) and one back (c_proj)."""

        def __init__(self, config, flash=True, device=None):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias, device=device)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias, device=device)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout
            self.flash = flash
            if not flash:
                size = config.block_size
                mask = lib.tril(lib.ones(size, size, device=device)).view(1, 1, size, size)
                self.register_buffer("bias", mask, persistent=False)

        def forward(self, x, cache=None):
            """x [B, T, C]. cache: None, or this layer's KVCache (the keys and values of the positions before
            x's are kept there, x's appended)."""
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            start = 0
            decode = cache.decode if cache is not None else None
            if decode is not None:  # a recorded decode step: the whole cache, the positions past the token masked
                if T != 1:
                    raise ValueError("CausalSelfAttention: a decode step takes one new token")
                k, v = cache.write(k, v)
            elif cache is not None:
                start = cache.length
                k, v = cache.append(k, v)
            if self.flash:
                # A query attends every cached key: one new token needs no mask; the prompt (start 0) is causal.
                causal = T > 1
                if causal and start:
                    raise ValueError("CausalSelfAttention: several new tokens after a cached prefix")
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if decode is None else decode.visible,
                                                   dropout_p=self.dropout if self.training else 0,
                                                   is_causal=causal)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                hidden = self.bias[:, :, start:start + T, :start + T] == 0 if decode is None else decode.hidden
                att = att.masked_fill(hidden, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config, device=None):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias, device=device)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias, device=device)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config, flash=True, device=None):
            super().__init__()
            self.ln_1 = LayerNorm(config.n_embd, bias=config.bias, device=device)
            self.attn = CausalSelfAttention(config, flash, device=device)
            self.ln_2 = LayerNorm(config.n_embd, bias=config.bias, device=device)
            self.mlp = MLP(config, device=device)

        def forward(self, x, cache=None):
            x = x + self.attn(self.ln_1(x), cache)
            return x + self.mlp(self.ln_2(x))

    class KVCache:
        """One layer's keys and values [B, nh, block_size, hs], filled from position 0 on. `length` counts the
        positions held (kept by the host). `decode`: None, or the Decode state of a recorded decode step, which
        writes each new token's key and value at the position it holds on the device (write)."""

        def __init__(self, capacity, zeroed=False):
            self.k = self.v = None
            self.length = 0
            self.capacity = capacity
            self.zeroed = zeroed  # (a decode step reads the whole buffer: the positions not written yet are 0)
            self.decode = None

        def append(self, k, v):
            """Write k, v [B, nh, T, hs] after the kept positions; return the keys and values so far."""
            end = self.length + k.size(2)
            if self.k is None:
                B, nh, _, hs = k.shape
                make = lib.zeros if self.zeroed else lib.empty
                self.k = make(B, nh, self.capacity, hs, dtype=k.dtype, device=k.device)
                self.v = make(B, nh, self.capacity, hs, dtype=v.dtype, device=v.device)
            self.k[:, :, self.length:end] = k
            self.v[:, :, self.length:end] = v
            self.length = end
            return self.k[:, :, :end], self.v[:, :, :end]

        def write(self, k, v):
            """Write k, v [B, nh, 1, hs] at the decode state's position (a device tensor, so that the recorded step
            replays for every position); return the whole buffers."""
            self.k.index_copy_(2, self.decode.pos, k)
            self.v.index_copy_(2, self.decode.pos, v)
            return self.k, self.v

    class Decode:
        """The state a recorded decode step shares across layers: the new token's position `pos` (int64 [1] on the
        device, advanced by the step itself), and per step `visible` (bool [block_size], True at positions <= pos:
        the keys a query attends) and `hidden` (its negation)."""

        def __init__(self, capacity, start, device):
            self.positions = lib.arange(capacity, device=device)
            self.pos = lib.full((1,), start, dtype=lib.long, device=device)
            self.visible = self.hidden = None

        def begin(self):
            self.visible = self.positions <= self.pos
            self.hidden = ~self.visible

    class GPT(nn.Module):
        """nanoGPT's GPT (see the module's docstring); flash=False: the hand-written attention."""

        def __init__(self, config, flash=True, device=None):
            super().__init__()
            assert config.vocab_size is not None
            assert config.block_size is not None
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd, device=device),
                wpe=nn.Embedding(config.block_size, config.n_embd, device=device),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config, flash, device=device) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias, device=device),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False, device=device)
            # weight tying (https://paperswithcode.com/method/weight-tying): one matrix embeds and un-embeds
            self.transformer.wte.weight = self.lm_head.weight
            self.apply(self._init_weights)
            # GPT-2's scaled init of the residual projections
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        def get_num_params(self, non_embedding=True):
            """Parameters, less the position embedding's by default (the token embedding's count: they are
            lm_head's too)."""
            n = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n -= self.transformer.wpe.weight.numel()
            return n

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None, caches=None):
            """idx: int64 [B, T], T <= block_size. With targets ([B, T]; -1 is ignored): (logits [B, T, vocab],
            the mean cross-entropy). Without: (the last position's logits [B, 1, vocab], None). caches: one KVCache
            per layer (generation): idx continues the positions they hold."""
            b, t = idx.size()
            start = caches[0].length if caches else 0
            if start + t > self.config.block_size:
                raise ValueError(f"Cannot forward sequence of length {start + t}, block size is only "
                                 f"{self.config.block_size}")
            decode = caches[0].decode if caches else None
            if decode is not None:  # a decode step: the position is on the device
                decode.begin()
                pos = decode.pos
            else:
                pos = lib.arange(start, start + t, dtype=lib.long, device=idx.device)  # shape (t)
            tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
            pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
            for i, block in enumerate(self.transformer.h):
                x = block(x, caches[i] if caches else None)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                # inference: the lm_head on the last position only
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def crop_block_size(self, block_size):
            """Shrink the model's context (nanoGPT's surgery for a smaller block size)."""
            assert block_size <= self.config.block_size
            self.config.block_size = block_size
            self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
            for block in self.transformer.h:
                if hasattr(block.attn, "bias"):
                    block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type=None):
            """nanoGPT's AdamW: weight decay on the matrices (2-D and up), none on biases and LayerNorm gains."""
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return lib.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        def estimate_mfu(self, fwdbwd_per_iter, dt, peak_flops=312e12):
            """Model flops utilisation against `peak_flops` (nanoGPT's: the A100's bfloat16 peak)."""
            N = self.get_num_params()
            cfg = self.config
            L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
            flops_per_token = 6 * N + 12 * L * H * Q * T
            flops_per_iter = flops_per_token * T * fwdbwd_per_iter
            return flops_per_iter * (1.0 / dt) / peak_flops

        def stream(self, idx, max_new_tokens, temperature=1.0, top_k=None, kv_cache=True, replay=True):
            """Yield each next token, an int64 [B, 1] tensor on idx's device (not read back: the caller reads
            it when it wants, e.g. `await t.item_async()` in a page). The arguments are generate's."""
            if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 0:
                raise ValueError(f"generate: max_new_tokens must be a whole number >= 0, got {max_new_tokens!r}")
            if not temperature > 0:
                raise ValueError(f"generate: temperature must be > 0, got {temperature!r} (top_k=1 is greedy)")
            if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
                raise ValueError(f"generate: top_k must be a whole number >= 1 or None, got {top_k!r}")
            if idx.ndim != 2 or idx.size(1) < 1:
                raise ValueError(f"generate: idx must be [B, T] token ids with T >= 1, got {list(idx.shape)}")
            if kv_cache and replay and lib.__name__ == "webgrad" and idx.device.backend.supports_capture:
                yield from self._stream_replayed(idx, max_new_tokens, temperature, top_k)
                return
            block = self.config.block_size
            caches = None
            for _ in range(max_new_tokens):
                with lib.no_grad():  # (not around the yield: the caller's code runs there, with its grad mode)
                    if not kv_cache:
                        # crop the context to block_size, nanoGPT's way: every step runs the whole context
                        logits, _ = self(idx if idx.size(1) <= block else idx[:, -block:])
                    elif caches is not None and caches[0].length < block:
                        logits, _ = self(idx[:, -1:], caches=caches)  # one new token
                    else:
                        # the first step, or a context past block_size: run the (cropped) context afresh
                        caches = [KVCache(block) for _ in self.transformer.h]
                        logits, _ = self(idx if idx.size(1) <= block else idx[:, -block:], caches=caches)
                    idx_next = self._sample(logits, temperature, top_k)
                    idx = lib.cat((idx, idx_next), dim=1)
                yield idx_next

        def _sample(self, logits, temperature, top_k):
            """The next token [B, 1] from the last position's logits: / temperature, cut to the top_k, softmax,
            one multinomial draw."""
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = lib.topk(logits, min(top_k, logits.size(-1)))
                logits = logits.masked_fill(logits < v[:, [-1]], -float("Inf"))
            probs = F.softmax(logits, dim=-1)
            return lib.multinomial(probs, num_samples=1)

        def _stream_replayed(self, idx, max_new_tokens, temperature, top_k):
            """stream() with the KV cache where the device records and replays work (webgrad.replayable): the
            prompt (or a context cropped past block_size) runs eagerly into caches of block_size positions, then
            each new token is one replay of a recorded decode step. That step embeds the token at the position
            the caches hold on the device, writes every layer's key and value there (index_copy_), attends over
            the whole cache with the later positions masked, samples the next token (temperature, top-k,
            multinomial: the draws advance at each replay as eager calls would) and advances the position: no
            Python runs per token but the replay, and the token goes back in on the device."""
            block = self.config.block_size
            tokens, caches, step = [idx], None, None

            def decode(token):
                logits, _ = self(token, caches=caches)
                token = self._sample(logits, temperature, top_k)
                caches[0].decode.pos.add_(1)
                return token

            try:
                for _ in range(max_new_tokens):
                    with lib.no_grad():
                        if caches is not None and caches[0].length < block:
                            idx_next = step(tokens[-1]).clone()  # (a replay refreshes the same output tensor)
                            for cache in caches:
                                cache.length += 1
                        else:
                            # the first step, or a context past block_size: the (cropped) context afresh
                            context = lib.cat(tokens, dim=1) if len(tokens) > 1 else tokens[0]
                            tokens = [context if context.size(1) <= block else context[:, -block:]]
                            caches = [KVCache(block, zeroed=True) for _ in self.transformer.h]
                            logits, _ = self(tokens[0], caches=caches)
                            idx_next = self._sample(logits, temperature, top_k)
                            if step is not None:
                                step.release()
                            step = None
                            if caches[0].length < block:
                                state = Decode(block, caches[0].length, idx.device)
                                for cache in caches:
                                    cache.decode = state
                                step = lib.replayable(decode)
                    tokens.append(idx_next)
                    yield idx_next
            finally:
                if step is not None:
                    step.release()

        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, kv_cache=True, callback=None,
                     replay=True):
            """idx [B, T] continued by max_new_tokens tokens, each drawn from the softmax of the last
            position's logits / temperature, cut to the top_k most likely where top_k is given (top_k=1:
            greedy). kv_cache=False recomputes the whole context at every step (nanoGPT's generate).
            callback(token): called with each new token ([B, 1], on the device) as it is drawn. Dropout applies
            in training mode: call model.eval() first, as nanoGPT's sample.py does. With the cache on a device
            that records work (WebGPU), each token after the first is one replay of a recorded decode step
            (_stream_replayed); replay=False runs every step eagerly instead."""
            tokens = [idx]
            for idx_next in self.stream(idx, max_new_tokens, temperature, top_k, kv_cache, replay):
                tokens.append(idx_next)
                if callback is not None:
                    callback(idx_next)
            return lib.cat(tokens, dim=1)

    classes = type("GPTClasses", (), dict(GPT=GPT, Block=Block, CausalSelfAttention=CausalSelfAttention, MLP=MLP,
                                          LayerNorm=LayerNorm, KVCache=KVCache, Decode=Decode))
    _DEFINED[key] = classes
    return classes


GPT = define(_webgrad_nn).GPT

SEQUENCE_SHAPE = (256,)


@register("gpt", SEQUENCE_SHAPE)
def gpt(input_shape=SEQUENCE_SHAPE, num_classes=65, n_layer=6, n_head=8, n_embd=384, dropout=0.0, bias=True,
        flash=True, device=None, nn=None):
    """A GPT over sequences of input_shape[0] tokens (its block_size) from a vocabulary of num_classes (default:
    65, the characters of nanoGPT's Shakespeare), 6 layers of width 384 with 8 heads by default. nn=torch.nn
    builds the same network in PyTorch."""
    shape = tuple(input_shape)
    if len(shape) != 1 or not isinstance(shape[0], int) or isinstance(shape[0], bool) or shape[0] < 1:
        raise ValueError(f"gpt takes token sequences: input_shape must be (block_size,), got {input_shape!r}")
    check_classes(num_classes, "gpt")
    config = GPTConfig(block_size=shape[0], vocab_size=num_classes, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                       dropout=dropout, bias=bias)
    return define(nn or _webgrad_nn).GPT(config, flash=flash, device=device)
