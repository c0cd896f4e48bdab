"""The kernel registry: one record per device kernel, and the device layer follows from the records.

Elementwise ops are records of the op table (``ops/table.py``); they reach a device through the ``unary``,
``unary_backward`` and ``binary`` kernels below. Every other piece of device work (a reduction, a product,
a convolution, an optimizer update, ...) is one :class:`DeviceKernel` record here. A record holds:

* its name and its arguments, each with its kind (``OUT``: a view the kernel writes whole; ``INOUT``: a view
  it reads and writes; ``IN``: a view it reads, possibly ``None`` where the default says so; ``VIEWS``: a
  list of views updated in place; ``ARG``: a Python value);
* what it computes (its docstring: the contract every backend keeps, checked by the tests against the CPU
  reference);
* its float16 policy (``half``): ``NATIVE``, its launcher takes float16 views itself; ``HALF``, a half
  launcher (``implement(..., half=True)``) runs where it fits the views and the float32 launcher through
  casts elsewhere; ``CAST``, float16 views are converted to float32 scratch around the float32 launcher;
  ``REFUSE``, float16 views raise TypeError (optimizer updates: autocast keeps parameters in float32);
* ``optional``: a backend may lack it (the engine then composes the same result from other kernels and
  asks ``backend.has(kernel)`` first); ``requires``: adapter features it needs (``"shader-f16"``, ...).

The implementations register themselves on the record: the CPU backend's NumPy reference with
``@kernels.NAME.implement("cpu")`` (``_backends/cpu/``) and the WebGPU launcher with
``@kernels.NAME.implement("webgpu")`` (``_backends/webgpu/``, called with the runtime first). Ops call a
record with the backend first::

    kernels.matmul(x.device.backend, out, a, b, trans_a=True)

How to add a kernel: write its record below, its NumPy reference in ``_backends/cpu/``, its WGSL in
``shaders/`` and its launcher in ``_backends/webgpu/``, then the op that calls it (``ops/``) and its tests.
``tests/backends/test_kernel_registry.py`` checks that every backend implements every record that is not
optional.

Memory
------
Kernels read and write :class:`webgrad._view.View` s over a backend's storages (shape, element strides,
element offset), exactly like a PyTorch tensor over its storage. Every kernel writes its result into
``out`` views that the engine allocated. ``fill`` and ``copy`` accept any strided ``out``; every other
kernel gets a contiguous ``out`` (possibly at a non-zero offset). Inputs may be any strided view unless a
kernel says "contiguous". Broadcasting is done by the engine before the call: an input is given a view of
the output's shape with stride 0 along broadcast dimensions. Kernels are asynchronous as far as the engine is
concerned: a backend may queue work and run it later, as long as ``to_bytes`` returns the data after all
queued work that writes it.

Device-side errors: a kernel that reads through an index checks it. The CPU raises at once; WebGPU sets
the runtime's error word and the error is raised at the next read-back (``webgrad/_bounds.py`` holds the
messages), as CUDA reports a device-side assert at the next sync.

Integers: index, label and count arguments are int64 or int32 views. A backend that holds int64 in 32 bits
(WebGPU: see webgrad/dtypes.py) reports an int64 result outside the int32 range the same way, never wrapping.
"""

OUT, INOUT, IN, VIEWS, ARG = "out", "inout", "in", "views", "arg"
NATIVE, HALF, CAST, REFUSE = "native", "half", "cast", "refuse"

# Reductions over the middle axis of a contiguous [outer, size, inner] view; out is [outer, inner].
# argmax/argmin write int64 (or int32) indices (first occurrence on ties, as PyTorch); the rest keep x's dtype.
REDUCE_OPS = ("sum", "prod", "max", "min", "argmax", "argmin")
# Distributions for `random`.
RANDOM_DISTS = ("uniform", "normal", "randint")
# Padding modes of augment_crop_flip, as torchvision's RandomCrop: outside the image a pixel is `fill`, the
# nearest edge pixel, the mirror without the edge (d c b | a b c d | c b a) or with it (b a | a b c d | d c).
AUGMENT_PAD_MODES = ("constant", "edge", "reflect", "symmetric")
AUGMENT_MAX_CHANNELS = 16
# augment_color's orders of (0 brightness, 1 contrast, 2 saturation)
AUGMENT_COLOR_ORDERS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))

_NO_DEFAULT = object()


class Arg:
    """One argument of a kernel: its name, kind and default (``Arg.required`` when it has none)."""

    __slots__ = ("name", "kind", "default")

    def __init__(self, name, kind, default=_NO_DEFAULT):
        self.name, self.kind, self.default = name, kind, default

    @property
    def required(self):
        return self.default is _NO_DEFAULT

    def __repr__(self):
        return f"{self.name}: {self.kind}" + ("" if self.required else f" = {self.default!r}")


def _args(spec):
    """Args from a compact spec: "out:out x:in a:arg=0.0 bias:in=None" (a default after '=' is a Python
    literal)."""
    import ast

    out = []
    for item in spec.split():
        name, _, rest = item.partition(":")
        kind, eq, default = rest.partition("=")
        if kind not in (OUT, INOUT, IN, VIEWS, ARG):
            raise ValueError(f"argument {name!r}: unknown kind {kind!r}")
        out.append(Arg(name, kind, ast.literal_eval(default)) if eq else Arg(name, kind))
    return tuple(out)


class DeviceKernel:
    """One device kernel: its signature, contract and policies; the backends' implementations register on it.

    Call it with the backend first: ``kernels.softmax(backend, out, x, log=True)``.
    """

    __slots__ = ("name", "args", "doc", "half", "optional", "requires", "impls", "half_impls", "positions",
                 "by_name")

    def __init__(self, name, args, doc, *, half=CAST, optional=False, requires=()):
        if half not in (NATIVE, HALF, CAST, REFUSE):
            raise ValueError(f"{name}: unknown float16 policy {half!r}")
        self.name = name
        self.args = _args(args)
        self.doc = doc
        self.half = half
        self.optional = optional
        self.requires = frozenset(requires)
        self.impls = {}  # backend name -> implementation
        self.half_impls = {}  # backend name -> float16 launcher (policy HALF)
        self.positions = tuple(a.kind for a in self.args)  # kind of each positional argument
        self.by_name = {a.name: a.kind for a in self.args}

    def implement(self, backend, *, half=False):
        """Decorator: register `fn` as `backend`'s implementation (``half=True``: its float16 launcher, which
        returns NotImplemented where it does not take the views it is given)."""
        def register(fn):
            (self.half_impls if half else self.impls)[backend] = fn
            return fn
        return register

    def __call__(self, backend, *args, **kwargs):
        if PROFILER is None:
            return backend.run(self, *args, **kwargs)
        return PROFILER.kernel(self, backend, args, kwargs)  # webgrad.profiler is recording

    def __repr__(self):
        return f"DeviceKernel({self.name!r})"


REGISTRY = {}
# The recorder of an active webgrad.profiler.profile (it times every kernel call), else None: one check per call.
PROFILER = None


def _kernel(name, args, doc, **policy):
    k = REGISTRY[name] = DeviceKernel(name, args, doc, **policy)
    return k


# ------------------------------------------------------------------------------------------ elementwise

fill = _kernel("fill", "out:out value:arg", """out[...] = value (a Python number or a dynamic scalar, converted to
out.dtype). out may be any strided view.""")

copy = _kernel("copy", "out:out x:in", """out[...] = x, converting x.dtype to out.dtype (float -> int truncates
toward zero; float32 -> float16 beyond 65504 is inf, as PyTorch). out and x may be any strided views.""", half=HALF)

unary = _kernel("unary", "op:arg out:out x:in a:arg=0.0 b:arg=0.0", """out = op(x, a, b) for op the name of a
record of ops/table.UNARY, a and b its scalar parameters (unused ones 0). out.dtype is the op's result dtype
(bool for comparisons); records with an exact integer form keep integer arithmetic when out is int32 or int64
(int32 wraps; int64 is exact, or an error where a backend cannot hold the result: see the module docstring).""",
                half=HALF)

unary_backward = _kernel("unary_backward", "op:arg out:out grad:in x:in y:in a:arg=0.0 b:arg=0.0", """out = grad *
d op(x)/dx for op a record of table.UNARY with a derivative; y = op(x). x, y and grad share out's shape.""",
                         half=HALF)

binary = _kernel("binary", "op:arg out:out x:in y:in", """out = op(x, y) for op a record of table.BINARY. x and y
come promoted to out's dtype except for comparisons and logical ops, and for float16 beside float32 (a float32 or
bool out: the half operand is read as it is, the math in float32).""", half=HALF)

where = _kernel("where", "out:out cond:in x:in y:in", """out = x where cond else y. cond is bool; x and y have
out's dtype, or one is float16 beside a float32 out (read as it is).""", half=HALF)

# ------------------------------------------------------------------------------------------ reductions

reduce = _kernel("reduce", "op:arg out:out x:in", """op (one of REDUCE_OPS) over the middle axis. x: contiguous
[outer, size, inner]; out: contiguous [outer, inner]. argmax/argmin write int64 or int32 indices of the first
extreme. Integer sums and products keep x's dtype (int32 wraps; int64 is exact).""")

cumsum = _kernel("cumsum", "out:out x:in", """Inclusive prefix sums along the middle axis: out[o, k, i] = sum of
x[o, j, i] for j <= k. x, out: contiguous [outer, size, inner], of one dtype (float32, or int32 / int64 with
exact integer sums; int32 wraps).""")

softmax = _kernel("softmax", "out:out x:in log:arg=False", """Row-wise (log-)softmax, numerically stable. x, out:
contiguous [rows, cols].""")

softmax_backward = _kernel("softmax_backward", "out:out grad:in y:in log:arg=False", """Gradient of (log-)softmax
given its output y: softmax y*(g - sum(g*y)); log_softmax g - exp(y)*sum(g). All contiguous [rows, cols].""")

# ------------------------------------------------------------------------------------------ linear algebra

matmul = _kernel("matmul", "out:out a:in b:in trans_a:arg=False trans_b:arg=False bias:in=None relu:arg=False",
                 """Batched out[i] = op(a[i]) @ op(b[i]) (+ bias) (relu).

out: contiguous [batch, M, N]. a: [batch, M, K], or [batch, K, M] when trans_a (then op(a) = a^T); b likewise
[batch, K, N] or [batch, N, K] when trans_b. The last two dims of a and b are contiguous row-major; the batch
stride (strides[0]) is the matrix size, or 0 to reuse one matrix for every batch. bias: optional contiguous
[N], added to every row before relu.""", half=HALF)

matmul_causal = _kernel("matmul_causal", "out:out a:in b:in trans_a:arg=False trans_b:arg=False part:arg='out'",
                        """matmul without bias for the products of causal attention (ops/attention_chunked.py),
whose weights are lower-triangular, where a backend may skip what the triangle makes zero or unwanted. part "out":
only out[..., m, n] with n <= m is wanted (the rest is unspecified); "a_lower": op(a) is lower-triangular (op(a)[m, k]
is 0 for k > m); "a_upper": op(a) is upper-triangular (0 for k < m). Otherwise as matmul; computing the whole
product is a correct implementation.""")

# ------------------------------------------------------------------------------------------ indexing

index_select = _kernel("index_select", "out:out x:in index:in", """out[o, k, i] = x[o, index[k], i]. x: [outer,
size, inner] contiguous; index: contiguous int64 or int32 [K], every entry in [0, size) (else IndexError).""")

index_select_backward = _kernel("index_select_backward", "out:out grad:in index:in", """out[o, j, i] = sum of
grad[o, k, i] over k with index[k] == j. out: [outer, size, inner] contiguous (every element written); grad:
contiguous [outer, K, inner].""")

gather = _kernel("gather", "out:out x:in index:in", """out[o, k, i] = x[o, index[o, k, i], i]. x: contiguous
[outer, size, inner]; index and out: contiguous [outer, K, inner], index int64 or int32 in [0, size).""")

gather_backward = _kernel("gather_backward", "out:out grad:in index:in", """out[o, j, i] = sum of grad[o, k, i]
over k with index[o, k, i] == j. out contiguous [outer, size, inner] (every element written).""")

# Scatters with a reduction (ops/scatter.py: scatter, scatter_add, scatter_reduce, index_add/copy/fill/reduce, put,
# index_put with accumulate): each target element reduces the source values its indices name, in one thread (no
# float atomics: WebGPU has none).
SCATTER_OPS = ("sum", "prod", "mean", "amax", "amin", "assign")

scatter_reduce = _kernel("scatter_reduce", "out:out x:in src:in index:in reduce:arg include_self:arg=True", """out =
x with, at each [o, j, i], `reduce` (one of SCATTER_OPS) over x[o, j, i] (only where include_self) and the src
values whose index names j: src[o, k, i] for index[o, k, i] == j where index is [outer, K, inner] (a scatter),
src[o, k, i] for index[k] == j where index is [K] (an index_add). An element no index names keeps x. "mean"
divides by the number of values reduced (floor division for integers); "amax"/"amin" propagate NaN; "assign"
writes the src value of the largest k (the last in index order: the write that lands last in a sequential loop).
x, out: contiguous [outer, size, inner], one dtype (float32, int32 or int64); src: contiguous [outer, K, inner]
of that dtype; index: contiguous int64 or int32, every entry in [0, size) (else IndexError). Sums and products
of int64 outside the int32 range are an error on a backend that holds int64 in 32 bits.""")

compact = _kernel("compact", "out:out x:in positions:in", """Stream compaction: out[positions[i] - 1] = x[i] for
each i where positions steps up (positions[i] > positions[i - 1], or positions[0] == 1): positions is the
inclusive prefix sum of a 0/1 mask (kernels.cumsum of it), so the kept elements land in order. x, positions:
contiguous [n] (positions int64 or int32); out: contiguous [positions[n - 1]] of x's dtype. (masked_select,
nonzero, unique: the caller reads the count back to size out.)""")

# Prefix scans other than sums (ops/scans.py): cumprod, logcumsumexp, cummax, cummin.
SCAN_OPS = ("prod", "logaddexp", "max", "min")

scan = _kernel("scan", "op:arg out:out x:in indices:out=None", """Inclusive scans along the middle axis of
contiguous [outer, size, inner] views: out[o, k, i] = x[o, 0, i] op ... op x[o, k, i] for op in SCAN_OPS
(logaddexp: log(exp(a) + exp(b)), exact where both are -inf). max and min also write indices (int64 or int32,
like out): the position along size of the running extreme, the latest one on ties, and NaN wins over numbers
(the latest NaN), as torch.cummax / cummin. float32 (and int32 / int64 for max and min).""")

histc = _kernel("histc", "out:out x:in low:arg high:arg", """A histogram of the elements of x (any view, float32)
in len(out) equal bins over [low, high] (low < high): element v counts in bin floor((v - low) * bins / (high -
low)), the last bin including high; elements outside [low, high] and NaN count nowhere. out: contiguous float32
[bins], the counts.""")

searchsorted = _kernel("searchsorted", "out:out sorted:in values:in right:arg=False", """For each value, its
insertion position in its row of `sorted` (ascending): out[b, n] = the binary search of values[b, n] in sorted[b, :]
that goes right of an entry unless entry >= value (right: entry > value), as torch's lower / upper bound, so that a
NaN on either side sends it right (a NaN value lands after every entry). sorted:
contiguous [B, M]; values: contiguous [B, N] of sorted's dtype (float32, int32 or int64); out: contiguous int64
or int32 [B, N].""")

# ------------------------------------------------------------------------------------------ random numbers

random = _kernel("random", "out:out dist:arg seed:arg offset:arg a:arg=0.0 b:arg=1.0", """Counter-based random
numbers, identical on every backend. out: contiguous. dist in RANDOM_DISTS.

For element i, with c = offset + i (u32 arithmetic, wrapping), k = h(seed):
    bits(j) = h(h(j ^ k) + k)                  # h = lowbias32, see below
    uniform:  u = (bits(c) >> 8) * 2**-24         -> out = a + (b - a) * u      (float32)
    randint:  u as above                          -> out = a + floor(u * (b - a)) (int64 or int32)
    normal:   u1 = ((bits(2c) >> 8) + 1) * 2**-24, u2 = (bits(2c + 1) >> 8) * 2**-24
              out = a + b * sqrt(-2 ln u1) * cos(2 pi u2)
h(x): x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16  (all u32)""")

# ------------------------------------------------------------------------------------------ fused loss

_CE = "logits:in target:in ignore_index:arg=-100 label_smoothing:arg=0.0"

cross_entropy = _kernel("cross_entropy", "out:out " + _CE + " lse:out=None", """Per-row softmax cross-entropy.
logits: contiguous float32 [rows, C] (or float16, read into float32: autocast's loss); target: int64 or int32
[rows]; out: float32 [rows] = -(1-ls)*logp[t] - ls/C*sum(logp); 0 where target == ignore_index. out may be
[rows, 2] instead: column 1 is then 1.0 where target != ignore_index, else 0.0 (the mean's divisor). A target outside [0, C) other than ignore_index raises IndexError
(webgrad/_bounds.py). lse: None, or contiguous float32 [rows] to receive each row's log-sum-exp of the logits (for
the backward).""", half=HALF)

cross_entropy_mean = _kernel("cross_entropy_mean", "out:out " + _CE + " lse:out=None", """reduction="mean" of
cross_entropy: out
float32 [2] = (the mean of the per-row losses over the rows whose target is not ignore_index, that count). The
mean is NaN when every row is ignored (as PyTorch); the count is the backward's divisor. Errors, lse and float16
logits as cross_entropy.""", half=HALF)

cross_entropy_backward = _kernel("cross_entropy_backward", "out:out logits:in target:in grad:in "
                                 "ignore_index:arg=-100 label_smoothing:arg=0.0 lse:in=None", """out [rows, C] =
grad[row] * (softmax(logits) - ((1-ls)*onehot(target) + ls/C)); 0 rows where target == ignore_index. grad: float32
[rows] (the upstream gradient of each row's loss). lse: None, or the forward's [rows] log-sum-exp, so that
softmax(logits) = exp(logits - lse) takes no reduction over the row. logits and out may both be float16
(computed in float32, rounded once).""", half=HALF)

# ------------------------------------------------------------------------------------------ convolution, pooling
# Geometry arguments are (height, width) pairs: kernel k, stride s, padding p, dilation d. Images are contiguous
# NCHW; OH = (H + 2p - d*(k-1) - 1) // s + 1 (likewise OW). conv2d is PyTorch's with one group: x [N, C, H, W],
# weight [O, C, kh, kw], grad (of the output) [N, O, OH, OW], all contiguous. How a backend multiplies (im2col
# and a product, implicit gathers, Winograd) is its own business; im2col and col2im are kernels of their own so
# that the tests compare the backends' unfolding.

_GEOM = "stride:arg padding:arg dilation:arg"

im2col = _kernel("im2col", "out:out x:in kernel:arg " + _GEOM, """out [N, C*kh*kw, OH*OW]: the patches of x
[N, C, H, W] (0 outside the image), row (c, i, j) and column (oh, ow) in row-major order.""")

col2im = _kernel("col2im", "out:out cols:in kernel:arg " + _GEOM, """The adjoint of im2col: out [N, C, H, W]
(every element written) = the sum of the entries of cols [N, C*kh*kw, OH*OW] that read each pixel.""")

conv2d = _kernel("conv2d", "out:out x:in weight:in bias:in " + _GEOM + " keep:arg=False relu:arg=False",
                 """out [N, O, OH, OW]: out[n, o, oh, ow] = bias[o] + sum over c, i, j of weight[o, c, i, j] *
x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside the image), then max(., 0) where relu. bias: contiguous
[O] or None. keep: the weight gradient will follow; the backend may return a workspace (e.g. the unfolded image)
for conv2d_backward_weight(..., workspace=) of the same x, else None.""", half=HALF)

conv2d_backward_input = _kernel("conv2d_backward_input", "out:out grad:in weight:in " + _GEOM, """out [N, C, H, W]
(every element written): the gradient of conv2d with respect to x, the adjoint of conv2d without bias applied
to grad.""", half=HALF)

conv2d_backward_weight = _kernel("conv2d_backward_weight", "out:out grad:in x:in " + _GEOM + " workspace:arg=None",
                                 """out [O, C, kh, kw]: the gradient of conv2d with respect to the weight,
out[o, c, i, j] = sum over n, oh, ow of grad[n, o, oh, ow] * x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw].
workspace: what conv2d(..., keep=True) returned for this x, or None.""", half=HALF)

max_pool2d = _kernel("max_pool2d", "out:out indices:out x:in kernel:arg " + _GEOM, """out, indices: [N, C, OH,
OW]; indices (int64 or int32) = h*W + w of the max within its plane (first on ties, padding never wins), as PyTorch's
return_indices.""")

max_pool2d_backward = _kernel("max_pool2d_backward", "out:out grad:in indices:in kernel:arg=None stride:arg=None "
                              "padding:arg=None dilation:arg=None", """out [N, C, H, W] (every element written) =
the sum of grad over the windows whose max it was. grad, indices: [N, C, OH, OW]. The window geometry, when
given, is the forward's: a backend may use it (non-overlapping windows need no atomics); the indices alone
determine the result.""")

avg_pool2d = _kernel("avg_pool2d", "out:out x:in kernel:arg stride:arg padding:arg count_include_pad:arg=True",
                     """The mean over each window; the divisor counts padding cells when count_include_pad.""")

avg_pool2d_backward = _kernel("avg_pool2d_backward", "out:out grad:in kernel:arg stride:arg padding:arg "
                              "count_include_pad:arg=True", """out [N, C, H, W] (every element written): the
adjoint of avg_pool2d.""")

# ------------------------------------------------------------------------------------------ batch normalisation

batch_norm = _kernel("batch_norm", "out:out save:out x:in weight:in bias:in running_mean:inout running_var:inout "
                     "training:arg momentum:arg eps:arg count:inout=None", """Batch normalisation of x, out:
contiguous [N, C, S] (S the spatial positions, 1 for [N, C]); per-channel vectors contiguous [C] or None; save:
contiguous [2, C], the mean and invstd = 1 / sqrt(var + eps) that normalised x (or None).

out = (x - mean[c]) * invstd[c] * weight[c] + bias[c] (weight 1 and bias 0 when None). training: mean and the
biased variance over (N, S) of each channel, written to save; running_mean and running_var (both or neither)
become (1 - m) * running + m * statistic, the variance unbiased (times M / (M - 1), M = N * S), m = momentum.
count (BatchNorm's num_batches_tracked, an int32 or int64 [1] view, or None) is incremented by one, and momentum None
means m = 1 / count after the increment (PyTorch's cumulative average), all on the device. Not training:
running_mean and running_var normalise and are copied into save as (mean, invstd). float16 activations are
read and written as half, with statistics and parameters in float32.""", half=NATIVE)

batch_norm_backward = _kernel("batch_norm_backward", "grad_input:out grad_weight:out grad_bias:out grad:in x:in "
                              "save:in weight:in training:arg", """Gradients of batch_norm given grad (of out) and
the forward's save; any output may be None. grad_weight = sum over (N, S) of grad * xhat, grad_bias = sum of
grad, xhat = (x - mean) * invstd; training: grad_input = weight * invstd * (grad - mean(grad) - xhat *
mean(grad * xhat)) (the statistics depend on x), else weight * invstd * grad.""", half=NATIVE)

# ------------------------------------------------------------------------------------------ optimizer updates
# One fused kernel per parameter: param, grad and state are contiguous views of one shape, updated in place.
# `hyper` is a dict of Python floats/bools (lr, betas, step, ...); a backend with capture receives hyper['lr']
# and hyper['step'] as its own dynamic scalars (Backend.scalar), which webgrad.optim rewrites only when they
# change. hyper['skip_if'], when present and not None, is a one-element float32 view: where it holds a value
# above 0 the update changes nothing (GradScaler's skipped step, decided on the device without a read-back).
# Adam's and RMSprop's hyper['skipped_steps'], given only with skip_if, is another: a skipped update adds 1 to
# it, and Adam's bias corrections use t = step - skipped_steps. hyper['prepare'] True, given only to a backend
# with supports_capture (a recorded update about to be replayed, Optimizer.prepare_replay): launch nothing, write
# this step's values where the recorded update reads them.

sgd_step = _kernel("sgd_step", "param:inout grad:in momentum_buffer:inout hyper:arg", """PyTorch SGD. hyper: lr,
momentum, dampening, weight_decay, nesterov, maximize, first. g = grad + weight_decay*param (negated first if
maximize); with momentum: buf = g if hyper['first'] else momentum*buf + (1-dampening)*g; g = g + momentum*buf if
nesterov else buf; param -= lr*g. momentum_buffer is None when momentum == 0.""", half=REFUSE)

adam_step = _kernel("adam_step", "param:inout grad:in exp_avg:inout exp_avg_sq:inout max_exp_avg_sq:inout "
                    "hyper:arg", """PyTorch Adam / AdamW. hyper: lr, beta1, beta2, eps, weight_decay, amsgrad,
maximize, decoupled, step. g = grad (negated if maximize); step t = hyper['step'] (already incremented); AdamW:
param *= 1 - lr*wd; Adam: g += wd*param. m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; amsgrad: vmax = max(vmax,
v) and v_used = vmax; param -= lr/(1-b1^t) * m / (sqrt(v_used/(1-b2^t)) + eps). max_exp_avg_sq is None unless
amsgrad.""", half=REFUSE)

rmsprop_step = _kernel("rmsprop_step", "param:inout grad:in square_avg:inout momentum_buffer:inout "
                       "grad_avg:inout hyper:arg", """PyTorch RMSprop. hyper: lr, alpha, eps, weight_decay,
momentum, centered, maximize. g = grad (negated if maximize) + wd*param; sq = alpha*sq + (1-alpha)*g*g; centered:
ga = alpha*ga + (1-alpha)*g and avg = sqrt(sq - ga*ga) + eps, else avg = sqrt(sq) + eps; momentum > 0:
buf = momentum*buf + g/avg, param -= lr*buf; else param -= lr*g/avg.""", half=REFUSE)

# ------------------------------------------------------------------------------------------ data augmentation
# Images are contiguous [N, C, H, W] batches (webgrad.transforms). Random parameters are drawn per sample from
# the stream of `random` (u(c) = its uniform at counter c, with this seed), so every backend draws the same.

augment_crop_flip = _kernel("augment_crop_flip", "out:out x:in seed:arg offset:arg pad:arg mode:arg fill:arg "
                            "flip_p:arg", """A random crop of the padded image, then a random horizontal flip,
drawn per sample (torchvision's RandomCrop and RandomHorizontalFlip). x: [N, C, H, W] float32 or uint8; out:
[N, C, OH, OW], x's dtype. pad = (left, top, right, bottom) gives the padded image [PH, PW]; mode in
AUGMENT_PAD_MODES; fill is the constant mode's value. Sample n: top row i = floor(u(offset + 3n) * (PH - OH +
1)), left column j = floor(u(offset + 3n + 1) * (PW - OW + 1)), flipped when u(offset + 3n + 2) < flip_p
(float32); out[n, c, y, v] = padded[n, c, i + y, j + (OW - 1 - v if flipped else v)].""")

augment_affine = _kernel("augment_affine", "out:out x:in scale:arg shift:arg channels_last:arg=False",
                         """out[n, c, h, w] = x[n, c, h, w] * scale[c] + shift[c] in float32 (ToTensor and
Normalize in one kernel). x: [N, C, H, W], or [N, H, W, C] when channels_last, float32 or uint8; out: float32
[N, C, H, W]; scale, shift: C Python floats (at most AUGMENT_MAX_CHANNELS).""")

augment_color = _kernel("augment_color", "out:out x:in seed:arg offset:arg brightness:arg contrast:arg "
                        "saturation:arg", """ColorJitter drawn per image (torchvision's, without hue). x: [N, C,
H, W] float32 or uint8, C 1 or 3; out like x. brightness, contrast, saturation: (low, high) factor ranges ((1, 1):
no change). Image n applies the three in the order AUGMENT_COLOR_ORDERS[floor(u(offset + 4n) * 6)] with factors
f = low + (high - low) * u(offset + 4n + 1, + 2, + 3) (float32). Each is torchvision's blend clamp(f * a + (1 -
f) * b) to [0, 1] (float) or [0, 255] (uint8, then truncated): brightness b = 0; contrast b = the mean over the
image of gray(a); saturation b = gray(a) per pixel, where gray = 0.2989 r + 0.587 g + 0.114 b (truncated for
uint8; a 1-channel image is its own gray, and saturation leaves it unchanged).""")

augment_erase = _kernel("augment_erase", "out:out x:in seed:arg offset:arg p:arg scale:arg log_ratio:arg "
                        "value:arg", """RandomErasing drawn per image (torchvision's). x: [N, C, H, W] float32 or
uint8; out like x. Image n is erased when u(c) < p, c = offset + 41n; then for attempt a = 0..9, with d = c + 1 +
4a (float32 math): area = H*W * (scale[0] + (scale[1] - scale[0]) * u(d)); r = exp(log_ratio[0] + (log_ratio[1]
- log_ratio[0]) * u(d + 1)); h = round(sqrt(area * r)), w = round(sqrt(area / r)) (half to even); the first
attempt with h < H and w < W sets rows i = floor(u(d + 2) * (H - h + 1)) .. i + h - 1 and columns j = floor(u(d +
3) * (W - w + 1)) .. j + w - 1 of every channel to `value`; none: unchanged.""")

# ------------------------------------------------------------------------------------------ fused extras
# Optional: where a backend lacks one, the engine composes the same result from the kernels above.

check_finite = _kernel("check_finite", "x:in nan_message:arg inf_message:arg error:arg",
                       """Report a NaN (inf) in the contiguous float32 view x at the next read-back: raise
error(nan_message), or, when `error` is a plain callable, call error(message) there. No sync of its own
(webgrad.replayable's check_finite).""", optional=True)

clip_grad_norm = _kernel("clip_grad_norm", "out:out grads:views max_norm:arg norm_type:arg "
                         "nonfinite_message:arg=None", """Fused clip_grad_norm_: out (float32 [1]) = the
norm_type-norm of all grads (contiguous float32 views) together, each scaled in place by min(max_norm / (norm +
1e-6), 1); a non-finite norm raises RuntimeError(nonfinite_message) at the next read-back when a message is
given.""", half=REFUSE, optional=True)

amp_unscale_check = _kernel("amp_unscale_check", "grads:views inv_scale:arg found_inf:inout", """GradScaler's fused
unscale: each of grads (contiguous float32 views) *= inv_scale in place, and found_inf (float32, one element) set
to 1.0 where one held inf/NaN.""", half=REFUSE, optional=True)

amp_restore_if = _kernel("amp_restore_if", "out:inout saved:in found:in", """GradScaler's undo of a step: out =
saved where found (float32, one element) is above 0.""", half=REFUSE, optional=True)

# ------------------------------------------------------------------------------------------ transformer kernels
# A transformer's step: masked_fill, dropout, layer norm, fused attention, the masked softmax of hand-written
# attention, and a grouped Adam. Random draws follow `random`'s stream: element i of a draw of n counters from
# (seed, offset) is kept by dropout where u(offset + i) >= p, u as `random`'s uniform (compared in float32), so
# a kernel that drops inside reproduces F.dropout's `rand(shape) >= p` for the same generator state.

masked_fill = _kernel("masked_fill", "out:out x:in mask:in value:arg", """out = value where mask else x. x and
mask (bool) are views of out's shape (the engine broadcasts them with stride 0); value: a Python number or a
dynamic scalar, converted to out.dtype as `copy` converts (toward zero for integers). out may be x itself.""")

layer_norm = _kernel("layer_norm", "out:out save:out x:in weight:in bias:in eps:arg rms:arg=False", """Layer
normalisation of each row of x, out: contiguous [rows, cols]. out = (x - mean) * rstd * weight + bias, with mean and
the biased variance over the row and rstd = 1 / sqrt(var + eps); weight, bias: contiguous [cols] or None (1 and 0).
save: contiguous [rows, 2], each row's (mean, rstd), or None: float32 (float64 for float64 x on the CPU). rms:
root-mean-square normalisation (F.rms_norm): mean is 0 (and saved as 0), var the mean of x^2.""")

layer_norm_backward = _kernel("layer_norm_backward", "grad_input:out grad_weight:out grad_bias:out grad:in x:in "
                              "save:in weight:in rms:arg=False", """Gradients of layer_norm given grad (of out,
contiguous [rows, cols]), x and the forward's save; any output may be None. With xhat = (x - mean) * rstd and gw =
grad * weight: grad_input = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (means over the row), without the
mean(gw) term where rms; grad_weight = the sum over rows of grad * xhat, grad_bias = the sum over rows of grad
(both [cols]).""")

_ATTENTION = "scale:arg causal:arg=False dropout_p:arg=0.0 seed:arg=0 offset:arg=0"

attention = _kernel("attention", "out:out lse:out q:in k:in v:in mask:in " + _ATTENTION, """Scaled dot-product
attention per (batch b, head h): out[b, h] = dropout(softmax(q[b, h] @ k[b, h]^T * scale + mask)) @ v[b, h].
q: [B, H, L, E], k: [B, H, S, E], v: [B, H, S, Ev], views of one dtype, out's too (float32; float16 computes in
float32 and rounds each stored element once), whose last dim is contiguous (any other strides; a backend may want
head sizes, offsets and strides that are multiples of 4, and raise NotImplementedError for shapes it does not
take, before it runs anything). out: [B, H, L, Ev], its last dim
contiguous and no two elements at one place, any other strides (ops/attention.py stores it in q's layout, as
PyTorch's fused attention does). lse: contiguous float32 [B, H, L] (the log-sum-exp of each row's scaled, masked
scores, for the backward), or None.
mask: None, or a [B, H, L, S] view (any strides, stride 0 where broadcast): float32, added to the scaled scores
(-inf: never attended), or bool, True where attended. causal: query i attends keys j <= i only (PyTorch's
is_causal). A row that attends no key is NaN (lse -inf). dropout_p > 0: weight (i, j) of head bh = b * H + h is
kept where u(offset + (bh * L + i) * S + j) >= dropout_p (the transformer section's draw, seed and offset ints or
u32 dynamic scalars) and scaled by 1 / (1 - dropout_p).""", half=HALF)

attention_backward = _kernel("attention_backward", "grad_q:out grad_k:out grad_v:out grad:in q:in k:in v:in out:in "
                             "lse:in mask:in " + _ATTENTION, """Gradients of attention given grad (of out, [B, H, L,
Ev], last dim contiguous), the forward's inputs and arguments, its out and lse; any output may be None, the others
of q's, k's and v's shapes with out's rules on strides (ops/attention.py stores each in its input's layout). With
P the weights before dropout (recomputed from lse), Pd after it, M the kept mask scaled by 1 / (1 - p): grad_v =
Pd^T grad; dP = (grad v^T) * M; D = rowsum(grad * out); dS = P * (dP - D); grad_q = dS k * scale, grad_k = dS^T q
* scale. The gradients and grad are of q's dtype; lse stays float32.""", half=HALF)

dropout = _kernel("dropout", "out:out x:in p:arg seed:arg offset:arg", """out[i] = x[i] / (1 - p) where element i (of
the row-major order) is kept, else 0 (also where x is NaN or inf): kept where u(offset + i) >= p (the transformer
section's draw; seed and offset ints or u32 dynamic scalars), 0 < p < 1. x, out: contiguous, one shape. The
mask is never stored: the gradient is this kernel on the upstream gradient with the same seed and offset.""")

# ------------------------------------------------------------------------------------------ sorting and sampling
# topk serves torch.topk, sort and argsort (ops/sorting.py); multinomial serves torch.multinomial and the GPT's
# generation (ops/sampling.py). Both are exact and deterministic, so every backend gives the same indices.

topk = _kernel("topk", "values:out indices:out x:in k:arg largest:arg=True", """The k largest (largest=False:
smallest) entries of each row of x, in order. x: contiguous [rows, n], float32, int32 or int64; values: contiguous
[rows, k] of x's dtype (x's entries, bit for bit); indices: contiguous int64 or int32 [rows, k], positions in the
row. 0 <= k <= n. The order: by value, largest first when `largest`, else smallest first; NaN is larger than
every number (first when largest, last otherwise); -0.0 equals 0.0; equal values keep their order in the row
(lower index first), so k = n is a stable sort (torch.sort(stable=True); descending = largest).""")

multinomial = _kernel("multinomial", "out:out probs:in seed:arg offset:arg replacement:arg", """Draws from
the categorical distributions given by the rows of probs (non-negative float32 weights, contiguous [rows, n],
not necessarily normalised); out: contiguous int64 or int32 [rows, s], the drawn categories. Without
replacement a drawn category's weight is 0 for the row's later draws (s <= n).

Draw t of row r takes u = `random`'s uniform at counter offset + r * s + t (seed and offset ints or u32 dynamic
scalars) and walks the weights w in float32, in this exact order, so that every backend draws the same: the row
is cut into 256 chunks of L = ceil(n / 256) entries (chunk c holds entries c*L .. min(n, (c+1)*L) - 1, maybe
none); S_c = the chunk's sum, added in order from 0; P_0 = 0, P_(c+1) = P_c + S_c; thr = u * P_256. The draw is
in the first chunk c with P_(c+1) > thr, at its first entry j with P_c + (w[c*L] + ... + w[j]) > thr (the inner
sum in order from 0, then added to P_c); where no chunk qualifies (rounding, or no weight left), the last entry
with w > 0, else the first entry not drawn yet (without replacement, torch too draws zero-weight categories once
the others are used up). Weights below 2**-126 count as 0 (GPUs flush subnormal numbers).

Errors, raised as RuntimeError (WebGPU: at the next read-back): an entry that is negative, infinite or NaN:
"probability tensor contains either `inf`, `nan` or element < 0"; a row summing to 0: "invalid multinomial
distribution (sum of probabilities <= 0)".""")

# ------------------------------------------------------------------------------------------ transformer kernels (2)

softmax_masked = _kernel("softmax_masked", "out:out x:in mask:in value:arg scale:arg=1.0", """The row softmax of
hand-written attention in one kernel: out = softmax(s) over the last dim, s = value where mask else x * scale.
x, out: contiguous [d0, d1, d2, cols]; mask: a bool view of that shape (any strides, stride 0 where broadcast),
or None. value -inf leaves masked entries out; a row with nothing left is NaN (as softmax of -inf).""")

softmax_masked_backward = _kernel("softmax_masked_backward", "out:out grad:in y:in mask:in scale:arg=1.0", """The
gradient of softmax_masked with respect to x: out = scale * y * (grad - sum(grad * y)) per row, 0 where masked.
grad, y (the forward's out), out: contiguous [d0, d1, d2, cols]; mask as the forward's.""")

adam_steps = _kernel("adam_steps", "params:views grads:views exp_avgs:views exp_avg_sqs:views "
                     "max_exp_avg_sqs:views hypers:arg", """adam_step on each parameter in turn: params[i] with
grads[i], exp_avgs[i], exp_avg_sqs[i], max_exp_avg_sqs[i] (None unless amsgrad) and hypers[i] (adam_step's hyper,
with skip_if and skipped_steps where given, without prepare), all contiguous float32. A backend may update many parameters in one dispatch (a
multi-tensor kernel); the results are adam_step's.""", half=REFUSE, optional=True)

# ------------------------------------------------------------------------------------------ value checks
# Values that PyTorch refuses where it reads them (one_hot's classes, binary_cross_entropy's probabilities, an
# integer divisor) are checked by one kernel, and an optimizer step that follows a failed device-side check
# changes nothing. The CPU raises at once; WebGPU sets the runtime's error word, raised at the next read-back.

check_values = _kernel("check_values", "x:in message:arg error:arg low:arg=None high:arg=None nan:arg=False "
                       "zero:arg=False below_message:arg=None", """Report the elements of x (any view; float32,
float16, int64, int32, uint8 or bool) that fail a check: raise error(template.format(value=i, size=n)), i the
row-major position of a failing element and n = x.numel, with template below_message (or message where None) for
an element not >= low, else message. Checks, in this order, each only where asked: nan, the element is NaN; low,
not element >= low (NaN fails it); high, not element <= high (NaN fails it); zero, the element == 0. low and high
are Python numbers compared as torch compares a tensor with one: rounded to x's floating dtype (float16 may be
compared in float32), exactly with integer x. The CPU raises at once; a backend that queues work reports at its
next read-back (no sync of its own, so it records into a replayed step). Which failing element is named may
differ between backends; that one is reported does not.""")

device_error_flag = _kernel("device_error_flag", "out:out found:in=None", """out (float32, one element) = 1.0
where a kernel reported a device-side error (one raised as an exception; not a callback's check) that no read-back
has raised yet, else 0.0; the larger of that and found (float32, one element, GradScaler's inf flag) where found
is given. An optimizer passes the flag as its updates' hyper['skip_if']: a step that follows a failed index or
value check changes nothing before the error raises at the next read-back, as the CPU's error raises in the
forward. Only for a backend that reports errors late (WebGPU), and there only worth running where
backend.errors_pending says an error may be there; the CPU raises at once and lacks it.""", optional=True)

# ------------------------------------------------------------------------------------------ linear algebra
# The dense factorizations behind torch.linalg's solvers (webgrad/linalg.py composes the rest from them). Every
# matrix operand is a contiguous [batch, rows, cols] view of float32 (float64 on the CPU); int32 results are
# LAPACK's: 1-based pivots, and an info of 0 (success) or the 1-based column where the factorization failed.

lu_factor = _kernel("lu_factor", "lu:out pivots:out info:out a:in", """LU with partial pivoting (LAPACK getrf):
a [batch, m, n] = P L U; lu holds L's strict lower part (unit diagonal implied) and U; pivots int32 [batch,
min(m, n)]: row j was swapped with row pivots[j] - 1 at step j (the largest |entry| of the column, the first on
ties); info int32 [batch]: 0, or j + 1 for the first exactly zero pivot U[j, j] (the factorization goes on).""",
                    half=REFUSE)

lu_permutation = _kernel("lu_permutation", "perm:out pivots:in", """The row order of LAPACK pivots: perm int32
[batch, m] starts as 0..m-1 and has entries j and pivots[j] - 1 swapped for j = 0, 1, ... in turn; then
a[perm[i]] is row i of L U (P[perm[i], i] = 1). pivots: int32 [batch, k], entries in [1, m].""", half=REFUSE)

cholesky = _kernel("cholesky", "l:out info:out a:in", """Cholesky (LAPACK potrf, lower): a [batch, n, n]
(its lower triangle read) = l l^T, l lower triangular with a positive diagonal and zeros above it; info int32
[batch]: 0, or j + 1 for the first leading minor that is not positive definite (that matrix's l is then only
meaningful in its first j columns).""", half=REFUSE)

triangular_solve = _kernel("triangular_solve", "x:out a:in b:in upper:arg=False unitriangular:arg=False",
                           """x = a^-1 b by substitution: a [batch, n, n] lower (upper) triangular, only that
triangle read, its diagonal taken as ones when unitriangular; b, x [batch, n, k]. A zero on the diagonal gives
inf / nan, as LAPACK trsm.""", half=REFUSE)

qr = _kernel("qr", "q:out r:out a:in", """Householder QR (LAPACK geqrf + orgqr signs: each reflector maps its
column to -sign(a_jj) |column|): a [batch, m, n] = q r with q [batch, m, c] orthonormal columns and r [batch, c,
n] upper triangular, c = m (complete) or min(m, n) (reduced).""", half=REFUSE)

eigh = _kernel("eigh", "values:out vectors:out a:in upper:arg=False", """The eigen-decomposition of a symmetric
a [batch, n, n] (its lower triangle read, the upper one when upper): values [batch, n] ascending, vectors [batch, n, n] orthonormal columns with a
vectors[:, j] = values[j] vectors[:, j] (each column's sign is the backend's).""", half=REFUSE)

svd = _kernel("svd", "u:out s:out vh:out a:in", """The reduced singular value decomposition a [batch, m, n] =
u diag(s) vh: s [batch, k] descending, non-negative; u [batch, m, k] and vh [batch, k, n] orthonormal columns
and rows (k = min(m, n); signs are the backend's, a pair of vectors flipped together).""", half=REFUSE)
