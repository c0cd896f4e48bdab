"""Scale benchmark: `python -m webgrad.bench scale [--models resnet18 widemlp transformer gpt] [--batch N] [--steps N]`.

Training steps of the models users train at scale, webgrad replayed (webgrad.replayable, on WebGPU) against
PyTorch eager on its best device here (CUDA if present), in one run:

  resnet18     ResNet-18, CIFAR variant, 3x32x32 inputs, batch 128       (webgrad.models, webgrad.bench.recipes)
  widemlp      MLP 3072-4096-4096-10, batch 128
  transformer  one encoder block, d_model 256, 4 heads, sequence 128, batch 32, mean-pooled into a classifier
  gpt          both GPT rows (webgrad.models.gpt, nanoGPT's decoder; dropout 0; AdamW as nanoGPT trains):
    gpt-6x384    6 layers, width 384, 8 heads, 256 tokens of 65 symbols, batch 16
    gpt2-small   GPT-2 small: 12 layers, width 768, 12 heads, 1,024 tokens of 50,257, batch 8 (5 timed steps a
                 window by default: a step takes about as long as 30 of the others)
  llama-8x512    a Llama-style decoder (webgrad.models.llama: RMSNorm, rotary embeddings, SwiGLU, no biases):
                 8 layers, width 512, 8 heads, 256 tokens of 32,000, batch 16, trained as the GPTs (no generation
                 rows)

The classifiers train with cross-entropy and SGD (lr 0.01, momentum 0.9) on random data of the right shapes, the
GPTs on random tokens. Each row gives samples/s (a GPT's: tokens/s), ms per step and peak GPU memory for both
libraries, and the ratios (webgrad / PyTorch: above 1 is faster for speed, below 1 is leaner for memory). `--amp`
trains both sides under autocast (float16) with a GradScaler (webgrad needs an adapter with shader-f16).
`--attention manual` gives the GPTs nanoGPT's hand-written attention (masked_fill + softmax) instead of
F.scaled_dot_product_attention, on both sides.

The GPT rows are followed by generation: tokens/s of model.generate (batch 1, a 16-token prompt, nanoGPT's
sample.py settings: temperature 0.8, top_k 200; 128 new tokens for gpt-6x384, 64 for gpt2-small), with the KV
cache and without it (the whole context run at every token), for both libraries in float32. `--no-generation`
leaves it out.

Peak memory counts what the run holds on the GPU from before the model is built: parameters, gradients,
optimizer state, the data batches and the step's intermediates.
  webgrad  webgrad.webgpu.max_memory_allocated() (live tensors' buffers at their peak), or, if higher,
           what a replay holds: the live tensors plus the buffers the recorded step keeps for its
           intermediates (every one of them is in use while it replays; see peak_bytes)
  PyTorch  torch.cuda.max_memory_allocated() (on the CPU there is no counter: "-")
tools/bench_dawn.py --scale prints the same tables for the browser path (the wheel in Pyodide under Node with
Dawn), through webgrad_result, webgrad_generation, torch_result and torch_generation here.
"""

import argparse
import gc
import time

import webgrad as wg
# bench train's loop (loss read every 10 steps, warmed up) and its PyTorch side's float32 settings
from webgrad.bench import train
from webgrad.bench.train import add_comparison_arguments, apply_comparison_arguments, print_torch_float32_math, time_loop
from webgrad.bench.recipes import (GPT_CONFIGS, GPT_MODELS, INPUT_SHAPES, SCALE_MODELS, TRANSFORMER_MODELS,
                                   benchmark_batches, benchmark_optimizer, benchmark_step)

MODELS = {**SCALE_MODELS, **TRANSFORMER_MODELS, **GPT_MODELS}
CHOICES = {**{name: (name,) for name in MODELS},  # --models names -> rows
           "gpt": tuple(name for name in GPT_MODELS if name.startswith("gpt"))}
DEFAULT_MODELS = ("resnet18", "widemlp", "transformer")
BATCH = {"resnet18": 128, "widemlp": 128, "transformer": 32, "gpt-6x384": 16, "gpt2-small": 8,  # the issues'
         "llama-8x512": 16}
STEPS = {"gpt2-small": 5}  # timed steps a window where --steps is not given (default: 30)
GENERATION = {"gpt-6x384": 128, "gpt2-small": 64}  # new tokens of the generation rows
PROMPT = 16
# replayable's calls before its first replay: an eager call, the recording, and the planned recording that may
# replace it (replay.py's memory planning)
MIN_WARMUP = 3


def peak_bytes(step):
    """webgrad's peak GPU memory so far: max_memory_allocated(), or what a replay of `step` (a Replayable)
    holds if that is more. A recorded step owns the buffers of the intermediates it made; between replays
    no tensor holds them (so memory_allocated() leaves them out) but no one else may use them either."""
    held = wg.webgpu.memory_allocated() + (step.graph.idle_bytes if step.graph is not None else 0)
    return max(wg.webgpu.max_memory_allocated(), held)


def _settle():
    gc.collect()
    wg.webgpu.synchronize()
    wg.webgpu.empty_cache()  # buffers earlier rows left free must not count as this row's


def _build(model_name, nn=None, attention="sdpa"):
    if model_name in GPT_MODELS:
        return MODELS[model_name](nn=nn, flash=attention == "sdpa")
    return MODELS[model_name](nn=nn)


def _tokens(model_name):
    """Tokens per sample: a GPT's sequence length (its rates are tokens/s), else 1 (samples/s)."""
    return INPUT_SHAPES[model_name][0] if model_name in GPT_MODELS else 1


def webgrad_result(model_name, batch, steps, warmup=10, device="webgpu", amp=False, attention="sdpa"):
    """{samples_s, ms, peak} (and tokens_s for a GPT): `steps` replayed training steps of `model_name` at
    `batch` on WebGPU; peak in bytes above what was allocated before the model was built."""
    _settle()
    base = wg.webgpu.memory_allocated()
    wg.webgpu.reset_peak_memory_stats()
    wg.manual_seed(0)
    model = _build(model_name, attention=attention).to(device)
    opt = benchmark_optimizer(model_name, model.parameters(), wg.optim)
    step = benchmark_step(model_name, model, opt, wg, amp=device if amp else None, replay=True)
    batches = benchmark_batches(model_name, wg, batch, device)
    seconds = time_loop(step, batches, steps, wg.webgpu.synchronize, warmup)
    peak = peak_bytes(step) - base
    step.release()
    result = {"samples_s": batch * steps / seconds, "ms": 1000 * seconds / steps, "peak": peak}
    if model_name in GPT_MODELS:
        result["tokens_s"] = result["samples_s"] * _tokens(model_name)
    return result


def torch_result(model_name, batch, steps, warmup=10, amp=False, attention="sdpa"):
    """The same for PyTorch eager on CUDA if present, else the CPU (peak None there), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    train.torch_float32_math(torch)  # --torch-tf32
    torch.manual_seed(0)
    model = _build(model_name, torch.nn, attention).to(dev)
    opt = benchmark_optimizer(model_name, model.parameters(), torch.optim)
    step = benchmark_step(model_name, model, opt, torch, amp=dev if amp else None)
    batches = benchmark_batches(model_name, torch, batch, dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    seconds = time_loop(step, batches, steps, sync, warmup)
    peak = torch.cuda.max_memory_allocated() - base if dev == "cuda" else None
    result = {"samples_s": batch * steps / seconds, "ms": 1000 * seconds / steps, "peak": peak, "device": dev}
    if model_name in GPT_MODELS:
        result["tokens_s"] = result["samples_s"] * _tokens(model_name)
    del model, opt, step, batches
    if dev == "cuda":
        torch.cuda.empty_cache()
    return result


def _generation_rates(lib, model, new_tokens, sync, windows):
    """{True: tokens/s with the KV cache, False: without}: the median of `windows` timed generate calls each,
    after one short call per mode (pipelines, caches)."""
    prompt = lib.randint(0, model.config.vocab_size, (1, PROMPT), device=model.lm_head.weight.device)
    rates = {}
    for kv_cache in (True, False):
        model.generate(prompt, 4, temperature=0.8, top_k=200, kv_cache=kv_cache)
        sync()
        times = []
        for _ in range(windows):
            start = time.perf_counter()
            out = model.generate(prompt, new_tokens, temperature=0.8, top_k=200, kv_cache=kv_cache)
            out.tolist()  # (waits for the device)
            times.append(time.perf_counter() - start)
        rates[kv_cache] = new_tokens / sorted(times)[len(times) // 2]
    return rates


def webgrad_generation(model_name, device="webgpu", windows=None, attention="sdpa", new_tokens=None):
    """{"new": tokens, "cache": tokens/s, "no_cache": tokens/s} of webgrad's generate for a GPT row (see the
    module doc)."""
    _settle()
    wg.manual_seed(0)
    model = _build(model_name, attention=attention).to(device).eval()
    sync = wg.webgpu.synchronize if device == "webgpu" else (lambda: None)
    new = new_tokens or GENERATION[model_name]
    rates = _generation_rates(wg, model, new, sync, windows or train.WINDOWS)
    return {"new": new, "cache": rates[True], "no_cache": rates[False]}


def torch_generation(model_name, windows=None, attention="sdpa", new_tokens=None):
    """The same for PyTorch eager on its best device, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    train.torch_float32_math(torch)
    torch.manual_seed(0)
    model = _build(model_name, torch.nn, attention).to(dev).eval()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    new = new_tokens or GENERATION[model_name]
    rates = _generation_rates(torch, model, new, sync, windows or train.WINDOWS)
    return {"new": new, "cache": rates[True], "no_cache": rates[False], "device": dev}


def parser(description):
    """The arguments this table and tools/bench_dawn.py --scale share."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=sorted(CHOICES),
                   help="rows (default: resnet18 widemlp transformer; gpt: gpt-6x384 and gpt2-small)")
    p.add_argument("--batch", type=int, help="one batch size for every model (default: resnet18 128, "
                                             "widemlp 128, transformer 32, gpt-6x384 16, gpt2-small 8)")
    p.add_argument("--steps", type=int, help="timed steps per window, after a warm-up (default 30; gpt2-small 5)")
    p.add_argument("--warmup", type=int, default=10, help=f"untimed steps first, at least {MIN_WARMUP} and a "
                                                          "second (default 10)")
    p.add_argument("--amp", action="store_true", help="mixed precision on both sides: autocast to float16 and a "
                   "GradScaler (webgrad needs an adapter with shader-f16)")
    p.add_argument("--attention", choices=["sdpa", "manual"], default="sdpa",
                   help="the GPTs' attention: F.scaled_dot_product_attention (default) or nanoGPT's hand-written "
                        "q @ k^T, masked_fill, softmax, @ v")
    p.add_argument("--no-generation", action="store_true", help="leave out the GPTs' generation rows")
    p.add_argument("--new-tokens", type=int, help="tokens each generation row generates (default: gpt-6x384 128, "
                                                  "gpt2-small 64)")
    p.add_argument("--no-torch", action="store_true", help="leave out PyTorch's columns")
    add_comparison_arguments(p)
    return p


def rows(args):
    """(model, batch, steps) for each row the arguments ask for."""
    names = dict.fromkeys(name for choice in args.models for name in CHOICES[choice])  # in order, once each
    return [(m, args.batch or BATCH[m], args.steps or STEPS.get(m, 30)) for m in names]


def header(gpt=False):
    if gpt:
        return (f"{'model':11} {'batch':>5} | {'webgrad tokens/s':>17} {'ms/step':>8} {'peak MiB':>9} | "
                f"{'torch tokens/s':>15} {'ms/step':>8} {'peak MiB':>9} {'device':>6} | {'speed':>6} {'memory':>6}")
    return (f"{'model':11} {'batch':>5} | {'webgrad samples/s':>17} {'ms/step':>8} {'peak MiB':>9} | "
            f"{'torch samples/s':>15} {'ms/step':>8} {'peak MiB':>9} {'device':>6} | {'speed':>6} {'memory':>6}")


def _rate(samples_s):
    return f"{samples_s:,.0f}" if samples_s >= 100 else f"{samples_s:.1f}"


def _mib(nbytes):
    return "-" if nbytes is None else f"{nbytes / 2**20:9.1f}"


def row(model, batch, ours, theirs):
    """One line of the table (a GPT's in tokens/s); theirs (torch_result) may be None."""
    key = "tokens_s" if "tokens_s" in ours else "samples_s"
    line = f"{model:11} {batch:5d} | {_rate(ours[key]):>17} {ours['ms']:8.2f} {_mib(ours['peak']):>9} | "
    if theirs is None:
        return line + f"{'-':>15} {'-':>8} {'-':>9} {'-':>6} | {'-':>6} {'-':>6}"
    speed = f"{ours['samples_s'] / theirs['samples_s']:5.2f}x"
    memory = f"{ours['peak'] / theirs['peak']:5.2f}x" if theirs["peak"] else "-"
    return (line + f"{_rate(theirs[key]):>15} {theirs['ms']:8.2f} {_mib(theirs['peak']):>9} "
            f"{theirs['device']:>6} | {speed:>6} {memory:>6}")


def generation_header():
    return (f"{'generation':11} {'new':>5} | {'webgrad tok/s cache':>19} {'no cache':>9} | "
            f"{'torch tok/s cache':>17} {'no cache':>9} {'device':>6} | {'speed cache':>11} {'no cache':>9}")


def generation_row(model, ours, theirs):
    """One line of the generation table; theirs (torch_generation) may be None."""
    line = f"{model:11} {ours['new']:5d} | {_rate(ours['cache']):>19} {_rate(ours['no_cache']):>9} | "
    if theirs is None:
        return line + f"{'-':>17} {'-':>9} {'-':>6} | {'-':>11} {'-':>9}"
    return (line + f"{_rate(theirs['cache']):>17} {_rate(theirs['no_cache']):>9} {theirs['device']:>6} | "
            f"{ours['cache'] / theirs['cache']:10.2f}x {ours['no_cache'] / theirs['no_cache']:8.2f}x")


def check_warmup(args, prog):
    """Refuse a --warmup whose untimed calls would not reach the first replay (see MIN_WARMUP)."""
    if args.warmup < MIN_WARMUP:
        raise SystemExit(f"{prog}: --warmup must be at least {MIN_WARMUP} (an eager call, the recording, and "
                         "the planned recording that may replace it)")


def print_settings(args):
    """The lines above the tables: what both sides compute in."""
    if args.amp:
        print("mixed precision: autocast(float16) + GradScaler on both sides")
    if any(m in GPT_MODELS for m, _, _ in rows(args)):
        print(f"GPT attention: {'F.scaled_dot_product_attention' if args.attention == 'sdpa' else 'hand-written'}")


def print_tables(results, args, theirs_fn, generation_fn):
    """The training table(s), then the generation table. `results` yields webgrad's (model, batch, result,
    generation or None) rows (it may compute each as it is asked for); theirs_fn(model, batch, steps) and
    generation_fn(model) give PyTorch's, called after webgrad's row, so the two never share the GPU."""
    printed = set()
    steps = {m: s for m, _, s in rows(args)}
    generated = []
    for model, batch, ours, gen in results:
        gpt = model in GPT_MODELS
        if gpt not in printed:
            print(header(gpt), flush=True)
            printed.add(gpt)
        print(row(model, batch, ours, None if args.no_torch else theirs_fn(model, batch, steps[model])), flush=True)
        if gen is not None:
            generated.append((model, gen, None if args.no_torch else generation_fn(model)))
    if generated:
        print(generation_header(), flush=True)
        for model, ours, theirs in generated:
            print(generation_row(model, ours, theirs), flush=True)


def main(argv=None):
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    apply_comparison_arguments(args)
    check_warmup(args, "bench scale")
    info = wg.webgpu.adapter_info()
    print(f"webgrad on WebGPU: {info.get('device') or info.get('description')} ({info.get('backend')})")
    print_torch_float32_math(args.no_torch)
    print_settings(args)
    start = time.perf_counter()

    def results():
        for model, batch, steps in rows(args):
            ours = webgrad_result(model, batch, steps, args.warmup, amp=args.amp, attention=args.attention)
            gen = None
            if model in GENERATION and not args.no_generation:
                gen = webgrad_generation(model, attention=args.attention, new_tokens=args.new_tokens)
            _settle()  # webgrad's free buffers go back to the device before PyTorch's row
            yield model, batch, ours, gen

    print_tables(results(), args,
                 lambda m, b, s: torch_result(m, b, s, args.warmup, amp=args.amp, attention=args.attention),
                 lambda m: torch_generation(m, attention=args.attention, new_tokens=args.new_tokens))
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
