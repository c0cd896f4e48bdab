"""Sweep conv_gemm's tile configurations and K splits over the convolutions of a ResNet-18 training step.

    python tools/conv_sweep.py                # ResNet-18 (CIFAR variant) at batch 128, ~80 s on an H200
    python tools/conv_sweep.py --quick        # tiny shapes, two configurations: a smoke test (lavapipe)
    python tools/conv_sweep.py --budget 60 --repeats 5 --configs 64x128 128x128w --cases fwd:64-64-32

For each distinct convolution of the step (the forward product, the input gradient, the weight gradient;
each with its shape) it runs conv_gemm.py's host functions with a forced tile configuration and K split
(conv_gemm.FORCED), records their dispatches (including the split-K reductions, and the fill and tap
copies of a strided input gradient) and times them with GPU timestamps the way `python -m webgrad.bench
profile` does (webgrad.bench.profile.time_dispatches: one pass per dispatch, median of --repeats). The
candidates: the planner's own choice, every configuration with the planner's K split for it (the thin ones only
for small products); then, beside the planner's choice again, the two fastest configurations with other splits
(unsplit, half, double, 4x the planner's). Each phase's candidates are all captured (their pipelines compiled)
before any is timed, then timed in ROUNDS rounds through all of them, each candidate's fastest round counting,
so that no compilation idles the GPU between timings and a clock change touches every candidate alike. It prints, per
convolution, a row per candidate: configuration, K split, workgroups, microseconds, TFLOP/s
(the convolution's nominal 2*N*O*OH*OW*C*kh*kw), the candidate's largest difference to the planner's
own choice (relative to that output's largest magnitude: a wrong kernel shows up here), then the best
candidate and what the planner picks. The cases run in order of their share of a step, within --budget
seconds; a line per case is flushed as it ends, so a run cut short still reports what it measured.

Needs a native adapter with timestamp queries (wgpu-py); on a software adapter (lavapipe) the runtime is
told it is a GPU so that these kernels run at all. No NumPy: data is written and compared through
`array`.
"""

import argparse
import array
import random
import struct
import sys
import time

from webgrad.bench.profile import time_dispatches
from webgrad.dtypes import float32
from webgrad._backends.webgpu import conv_gemm
from webgrad._backends.webgpu.runtime import default_runtime
from webgrad._backends.webgpu.views import contiguous_view

# (C_in, C_out, map, kernel, stride, padding, count per step): ResNet-18, CIFAR variant (3x3 stem, no pool)
RESNET18 = [
    (64, 64, 32, 3, 1, 1, 4), (128, 128, 16, 3, 1, 1, 3), (256, 256, 8, 3, 1, 1, 3), (512, 512, 4, 3, 1, 1, 3),
    (64, 128, 32, 3, 2, 1, 1), (128, 256, 16, 3, 2, 1, 1), (256, 512, 8, 3, 2, 1, 1),
    (64, 128, 32, 1, 2, 0, 1), (128, 256, 16, 1, 2, 0, 1), (256, 512, 8, 1, 2, 0, 1),
    (3, 64, 32, 3, 1, 1, 1),
]
# the MNIST CNN (webgrad.examples.models "cnn": conv 1->16 on 28x28, 16->32 on 14x14): under
# conv_gemm.MIN_CHANNELS, so its step runs these on matmul.wgsl's per-image products; --model cnn times them here
CNN = [(1, 16, 28, 3, 1, 1, 1), (16, 32, 14, 3, 1, 1, 1)]
MODELS = {"resnet18": RESNET18, "cnn": CNN}
QUICK = [(8, 8, 8, 3, 1, 1, 1), (8, 16, 8, 3, 2, 1, 1)]
KINDS = ("fwd", "dgrad", "wgrad")


def case_name(kind, c, o, hw, k, s):
    return f"{kind}:{c}-{o}-{hw}" + (f"-k{k}" if k != 3 else "") + (f"-s{s}" if s != 1 else "")


def _random_bytes(numel, rng):
    # a prime-length block of uniform [-1, 1) values repeated: the host stays fast for 8M floats
    block = array.array("f", (rng.uniform(-1.0, 1.0) for _ in range(4093)))
    data = block.tobytes() * (numel // len(block) + 1)
    return data[:4 * numel]


def _tensor(rt, shape, rng=None):
    numel = 1
    for n in shape:
        numel *= n
    v = contiguous_view(rt.storage(numel, float32), shape, float32)
    if rng is not None:
        rt.write(v.storage, _random_bytes(numel, rng))
    return v


class Case:
    """One convolution product of the step and its operands on the GPU."""

    def __init__(self, rt, kind, batch, c, o, hw, k, s, p, count, rng):
        self.kind, self.count = kind, count
        self.name = case_name(kind, c, o, hw, k, s)
        oh = (hw + 2 * p - k) // s + 1
        self.geom = ((s, s), (p, p), (1, 1))
        self.flops = 2 * batch * o * oh * oh * c * k * k
        x_shape, w_shape, y_shape = (batch, c, hw, hw), (o, c, k, k), (batch, o, oh, oh)
        if kind == "fwd":
            self.args = (_tensor(rt, y_shape), _tensor(rt, x_shape, rng), _tensor(rt, w_shape, rng), None, self.geom)
            self.fn = conv_gemm.forward
        elif kind == "dgrad":
            self.args = (_tensor(rt, x_shape), _tensor(rt, y_shape, rng), _tensor(rt, w_shape, rng), self.geom)
            self.fn = conv_gemm.backward_input
        else:
            self.args = (_tensor(rt, w_shape), _tensor(rt, y_shape, rng), _tensor(rt, x_shape, rng), self.geom)
            self.fn = conv_gemm.backward_weight
        self.out = self.args[0]

    def plans(self):
        """The main plans the current FORCED settings give (a strided input gradient has one per phase)."""
        made = []
        original = conv_gemm.run
        conv_gemm.run = lambda rt, p, *a, **k: made.append(p)
        try:
            self.fn(default_runtime(), *self.args)
        finally:
            conv_gemm.run = original
        return made

    def capture(self, rt):
        """The case's dispatches as the current FORCED settings plan them, captured (every pipeline compiled
        now, before any timing), run once, and a sample of what they computed: (graph, sample)."""
        with rt.capture() as graph:
            self.fn(rt, *self.args)
        graph.replay()
        rt.synchronize()
        return graph, self.sample(rt)

    @staticmethod
    def timed(rt, graph, repeats, warm=0.02):
        """GPU seconds summed over a captured candidate's dispatches (median of `repeats`), after `warm` seconds
        of it back to back. The sweep times its candidates round by round, all compiled beforehand: an H200
        left idle while the host compiled the next pipeline dropped its clocks, and timed candidate by
        candidate the same dispatch read 308 us, then 1,172 us later in the same case. Round
        by round, the planner's choice read 336.0-339.6 us in its five warm rounds."""
        start = time.perf_counter()
        while time.perf_counter() - start < warm:
            for _ in range(4):
                graph.replay()
            rt.synchronize()
        _, times = time_dispatches(rt, graph.records, repeats)
        return sum(times)

    def sample(self, rt):
        # 4 runs of up to 16K values spread over the output (reading all 32 MB of one would cost more
        # than timing it): every tile row and column position occurs in each run
        n = self.out.numel
        run = min(n, 16384)
        got = array.array("f")
        for i in range(4):
            start = (n - run) * i // 3
            got.frombytes(rt.read(self.out.storage, 4 * start, 4 * run))
        return got


ROUNDS = 3  # rounds through a phase's candidates (each candidate's fastest counts)


def warm_up(rt, case, seconds=1.0):
    """Replay the case's planned dispatches for a while: the GPU's clocks come up before any timing."""
    with rt.capture() as graph:
        case.fn(rt, *case.args)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            graph.replay()
        rt.synchronize()
    graph.release()


def worth_trying(case, cfg):
    """Whether phase one tries `cfg`: the thin tiles (4x4 per thread) only where the planner's big tile
    leaves the GPU short of work (fewer than conv_gemm.FULL tiles): elsewhere they never won."""
    c = conv_gemm.CONFIGS[cfg]
    if c["TM"] * c["TN"] == 64:
        return True
    conv_gemm.FORCED.update(config="64x128", splits=1)
    try:
        plans = case.plans()
    finally:
        conv_gemm.FORCED.update(config=None, splits=None)
    return sum(p.workgroups[0] * p.workgroups[1] for p in plans) < conv_gemm.FULL


def split_variants(auto, quick):
    """Phase two's K splits for a configuration whose planner split is `auto`."""
    if quick:
        return [1, 2] if auto == 1 else [1]
    return sorted({1, max(1, auto // 2), 2 * auto, 4 * auto} - {auto})


def config_name(plan):
    constants = dict(plan.constants)
    return next((n for n, v in conv_gemm.CONFIGS.items() if all(constants.get(k) == x for k, x in v.items())
                 and all(constants.get(k, 0) == 0 for k in ("WARP_TILED", "SWIZZLE") if k not in v)), "?")


def describe(plans):
    p = plans[0]
    return (f"{p.entry[-2:]} " + (f"{len(plans)}*" if len(plans) > 1 else "") + "x".join(map(str, p.workgroups))
            + (" +" + p.reduce.entry[5:] if p.reduce else ""))


def diff(a, b):
    scale = max(max(abs(v) for v in b), 1e-30)
    return max(abs(x - y) for x, y in zip(a, b)) / scale


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny shapes and two configurations (smoke test)")
    ap.add_argument("--batch", type=int, default=None, help="images per batch (128; --quick: 2)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per candidate (5; --quick: 2)")
    ap.add_argument("--budget", type=float, default=80.0, help="seconds; cases left when it is spent are skipped")
    ap.add_argument("--configs", nargs="+", default=None, help="tile configurations (default: every one): names, or "
                    "experimental specs WG_X,WG_Y,TM,TN,BK[,w][,nbuf1] of up to 32 KiB of workgroup memory")
    ap.add_argument("--cases", nargs="+", default=None, help="only these cases (names as printed)")
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet18", help="whose convolutions (resnet18)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rt = default_runtime()
    rt.software = False  # these kernels run on a software adapter only when it is told it is a GPU
    info = rt.binding.info()
    print(f"conv_sweep on {info.get('device') or info.get('description')} ({info.get('backend')})", flush=True)
    batch = args.batch or (2 if args.quick else 128)
    repeats = args.repeats or (2 if args.quick else 5)
    configs = args.configs or (["64x128", "32x32"] if args.quick else list(conv_gemm.CONFIGS))
    configs = [conv_gemm.add_config(c) if "," in c else c for c in configs]  # experimental: WG_X,WG_Y,TM,TN,BK[,w][,nbuf1]
    shapes = QUICK if args.quick else MODELS[args.model]
    rng = random.Random(0)
    # the step's biggest items first: forward and both gradients of the stride-1 3x3 convolutions
    todo = [(kind, sh) for sh in shapes for kind in KINDS if not (kind == "dgrad" and sh[0] in (1, 3))]  # a stem: no input gradient
    summary = []
    for kind, (c, o, hw, k, s, p, count) in todo:
        name = case_name(kind, c, o, hw, k, s)
        if args.cases and name not in args.cases:
            continue
        if time.perf_counter() - t0 > args.budget:
            print(f"{name}: skipped (budget of {args.budget:.0f} s spent)", flush=True)
            continue
        case = Case(rt, kind, batch, c, o, hw, k, s, p, count, rng)
        if not summary and not args.quick:
            warm_up(rt, case)  # the clocks up from the start
        mnk = " ".join("x".join(map(str, struct.unpack_from("<3I", q.params))) for q in case.plans())
        print(f"\n{name} x{count}  N={batch} C={c} O={o} {hw}x{hw} k{k} s{s}  {case.flops / 1e9:.2f} GFLOP"
              f"  product MxNxK {mnk}", flush=True)
        print(f"  {'config':<13}{'splits':>6}  {'dispatch':<22}{'us':>9}{'TFLOP/s':>9}{'diff':>10}")
        rows, ref, seen, spread = [], None, set(), []

        def candidate(cfg, splits):
            """(label, splits shown, plans, graph, difference to the planner's output), or None."""
            nonlocal ref
            conv_gemm.FORCED.update(config=cfg, splits=splits)
            try:
                plans = case.plans()
                key = (cfg, tuple(q.workgroups for q in plans))
                if cfg is not None and key in seen:
                    return None  # a split clamped to one already measured
                seen.add(key)
                graph, got = case.capture(rt)
            except Exception as e:  # a configuration the shape cannot take: say so and go on
                print(f"  {cfg or 'planner':<13}{splits or '-':>6}  failed: {type(e).__name__}: {e}", flush=True)
                return None
            finally:
                conv_gemm.FORCED.update(config=None, splits=None)
            d = 0.0 if ref is None else diff(got, ref)
            ref = got if ref is None else ref
            return cfg, max(q.workgroups[2] for q in plans), plans, graph, d

        def time_all(candidates):
            """Time the candidates in ROUNDS rounds, each round through all of them (the clocks stay up and the
            same for all), and print a row for each: its fastest round."""
            best = [float("inf")] * len(candidates)
            for _ in range(ROUNDS):
                for i, (_, _, _, graph, _) in enumerate(candidates):
                    secs = case.timed(rt, graph, repeats)
                    best[i] = min(best[i], secs)
                    if i == 0 and candidates[0][0] is None:
                        spread.append(secs)
            for (cfg, split_shown, plans, graph, d), secs in zip(candidates, best):
                graph.release()
                name = config_name(plans[0])
                rows.append((secs, cfg or "auto " + name, split_shown, name))
                print(f"  {rows[-1][1]:<13}{split_shown:>6}  {describe(plans):<22}{secs * 1e6:9.1f}"
                      f"{case.flops / secs / 1e12:9.2f}{d:10.1e}" + ("  WRONG" if d > 1e-3 else ""), flush=True)

        # phase one: the planner's choice, then every configuration with the planner's K split for it;
        # phase two: the fastest configurations with other K splits, timed beside the planner's choice again
        phase = []
        for cfg in [None] + [c for c in configs if worth_trying(case, c)]:
            if cfg is not None and time.perf_counter() - t0 > args.budget + 20:
                print("  (budget overrun: the case's remaining candidates skipped)")
                break
            phase.append(candidate(cfg, None))
        time_all([c for c in phase if c is not None])
        top = []
        for r in sorted(rows):
            if r[3] not in top:
                top.append(r[3])
        phase = [candidate(None, None)] if rows and not args.quick else []
        for cfg in top[:1 if args.quick else 2]:
            auto = max(r[2] for r in rows if r[3] == cfg)
            for splits in split_variants(auto, args.quick):
                # the planner's scratch limit (a buffer of more could pass WebGPU's binding size limit)
                fits = splits == 1 or splits * case.out.numel <= conv_gemm.MAX_SCRATCH
                if fits and time.perf_counter() - t0 <= args.budget + 20:
                    phase.append(candidate(cfg, splits))
        phase = [c for c in phase if c is not None]
        if phase:
            time_all(phase)
        if len(spread) > 1:  # the planner's choice, round by round: how steady the clocks were
            print(f"  planner's choice by round: {' '.join(f'{t * 1e6:.1f}' for t in spread)} us")
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
        if not rows:
            continue
        best, auto = min(rows), rows[0]
        print(f"  best: {best[3]} splits={best[2]} {best[0] * 1e6:.1f} us; planner {auto[1]} splits={auto[2]} "
              f"{auto[0] * 1e6:.1f} us ({auto[0] / best[0]:.2f}x the best)", flush=True)
        summary.append((name, count, auto, best))
        for v in case.args:
            if hasattr(v, "storage"):
                v.storage = None
    if summary:
        print(f"\nsummary ({time.perf_counter() - t0:.0f} s): case, count per step, planner, best")
        tot_a = tot_b = 0.0
        for name, count, auto, best in summary:
            tot_a, tot_b = tot_a + count * auto[0], tot_b + count * best[0]
            print(f"  {name:<22} x{count}  {auto[1]:<13} s{auto[2]:<4} {auto[0] * 1e6:8.1f} us   "
                  f"{best[3]:<11} s{best[2]:<4} {best[0] * 1e6:8.1f} us")
        print(f"  per step over these cases: planner {tot_a * 1e6:.0f} us, best {tot_b * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
