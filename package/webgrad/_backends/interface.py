"""The device interface: everything the engine above asks of a backend.

The autograd engine and every op (``webgrad/ops``) are written once against this interface. A backend
implements it three times over: ``cpu.py`` (NumPy, the numerical reference), and the WebGPU runtime with
its two bindings (``webgpu/browser.py`` through Pyodide's JS FFI, ``webgpu/native.py`` through wgpu-py).

Memory
------
A backend hands out *storages*: opaque handles to a flat block of elements of one dtype. The engine
never looks inside; it describes what a kernel should read or write with a :class:`View` over a
storage (shape, element strides, element offset), exactly like a PyTorch tensor over its storage.

Data crosses the boundary in the canonical layout of :mod:`webgrad.dtypes` (packed little-endian;
bool is one byte 0/1).

Kernels
-------
Every kernel writes its result into ``out`` views that the engine allocated. ``fill`` and ``copy``
accept any strided ``out`` (that is how slice assignment, ``cat`` and in-place updates write into part of
a storage); every other kernel gets a contiguous ``out`` (possibly at a non-zero offset). Inputs may be
any strided view unless a kernel says "contiguous". Broadcasting is
done by the engine before the call: an input is given a view of the output's shape with stride 0
along broadcast dimensions, so a kernel never has to reason about broadcasting rules.

Kernels are *asynchronous* as far as the engine is concerned: a backend may queue work and run it
later, as long as ``to_bytes`` returns the data after all queued work that writes it.

The op tables (names a kernel understands) are listed below; each backend implements every name.
"""

import contextlib

# Unary and binary ops are the records of the op table, webgrad/ops/table.py (UNARY, BINARY): each
# record carries its CPU reference and its WGSL, so a backend implements `unary`/`binary` once for all
# of them. Unary: out = f(x, a, b), `a` and `b` the op's scalar parameters (unused ones are 0); records
# with an exact integer form keep int32 arithmetic when out is int32. Binary: out = f(x, y).

# Reductions over the middle axis of a contiguous [outer, size, inner] view; out is [outer, inner].
# argmax/argmin write int32 indices (first occurrence on ties, as PyTorch); the rest keep x's dtype.
REDUCE_OPS = ("sum", "prod", "max", "min", "argmax", "argmin")

# Distributions for `random`.
RANDOM_DISTS = ("uniform", "normal", "randint")


class Backend:
    """Abstract base: the methods every backend implements. Arguments are documented here once."""

    name = "abstract"  # "cpu" or "webgpu"

    # ----------------------------------------------------------------- memory
    def empty(self, numel, dtype):
        """A new storage of `numel` elements of `dtype`, contents undefined."""
        raise NotImplementedError

    def from_bytes(self, data, dtype):
        """A new storage holding `data` (a bytes-like object in `dtype`'s canonical layout)."""
        raise NotImplementedError

    def to_bytes(self, view):
        """The elements of `view` in row-major order, canonical layout, as `bytes` (waits for queued work)."""
        raise NotImplementedError

    async def to_bytes_async(self, view):
        """Like to_bytes, for runtimes that cannot block (a browser without JSPI). Default: the sync one."""
        return self.to_bytes(view)

    def synchronize(self):
        """Submit queued work and wait for it to finish."""

    def submit(self):
        """Start queued work without waiting for it: called at the end of each optimizer step, so that a
        backend which queues (WebGPU) computes one training step while the host issues the next, as CUDA's
        asynchronous launches do. A backend that runs each kernel at once has nothing to do."""

    # ----------------------------------------------------------------- graph capture (a capability)
    # A backend that queues its work can record it once and replay it (webgrad.replayable). It sets
    # supports_capture and implements the methods below; the engine asks the flag, never probes.
    supports_capture = False

    @property
    def capturing(self):
        """Whether a capture is recording."""
        return False

    def outside_capture(self):
        """A context in which work runs once and is not recorded, even inside a capture, and new storages
        do not belong to the graph: how state that outlives a step (an optimizer's moments, GradScaler's
        scale) is made when the step that first needs it is being recorded. Else its initialisation would be
        recorded and run again at every replay."""
        return contextlib.nullcontext()

    def capture(self, replacing=None, plannable=False):
        """``with backend.capture() as graph:`` runs and records the work issued inside; then
        ``graph.replay()`` runs it again and ``graph.release()`` frees it. ``graph.read_backs`` counts the
        values read back inside the block; a graph with any refuses to replay (RuntimeError): a replay would
        repeat what the host decided from them. With ``plannable=True`` the caller may record the same step
        again: ``graph.plan_gain`` is the bytes of memory that recording it with ``capture(replacing=graph)``
        would save (0 where that does not pay); that recording releases `graph` and lays out its own memory
        from what `graph` learned."""
        raise NotImplementedError(f"the {self.name} backend cannot capture work for replay")

    def scalar(self, value, kind="f32"):
        """A kernel scalar that may change between replays (e.g. the learning rate): an object with
        ``.value`` and ``.set(value)`` that kernels read from the device. Without capture: the number."""
        return value

    def write(self, storage, data, offset=0):
        """Overwrite elements [offset, offset + n) of `storage` with canonical bytes: how new inputs
        reach a captured graph without a new allocation."""
        raise NotImplementedError(f"the {self.name} backend does not write into storages in place")

    # ----------------------------------------------------------------- elementwise
    def fill(self, out, value):
        """out[...] = value (a Python number, converted to out.dtype)."""
        raise NotImplementedError

    def copy(self, out, x):
        """out[...] = x, converting x.dtype to out.dtype (float -> int truncates toward zero)."""
        raise NotImplementedError

    def unary(self, op, out, x, a=0.0, b=0.0):
        """out = op(x) for op a record of table.UNARY. out.dtype is the op's result dtype (bool for comparisons)."""
        raise NotImplementedError

    def unary_backward(self, op, out, grad, x, y, a=0.0, b=0.0):
        """out = grad * d op(x)/dx for op a record of table.UNARY with a derivative. x and y = op(x) share grad's shape."""
        raise NotImplementedError

    def binary(self, op, out, x, y):
        """out = op(x, y) for op a record of table.BINARY. x and y may have different dtypes from out; the engine
        passes them already promoted (both of out's dtype) except for comparisons and logical ops."""
        raise NotImplementedError

    def where(self, out, cond, x, y):
        """out = x where cond else y. cond is bool; x, y have out's dtype."""
        raise NotImplementedError

    # ----------------------------------------------------------------- reductions
    def reduce(self, op, out, x):
        """op in REDUCE_OPS over the middle axis. x: contiguous [outer, size, inner]; out: contiguous [outer, inner]."""
        raise NotImplementedError

    def softmax(self, out, x, log=False):
        """Row-wise (log-)softmax, numerically stable. x, out: contiguous [rows, cols]."""
        raise NotImplementedError

    def softmax_backward(self, out, grad, y, log=False):
        """Gradient of (log-)softmax given its output y. softmax: y*(g - sum(g*y));
        log_softmax: g - exp(y)*sum(g). All contiguous [rows, cols]."""
        raise NotImplementedError

    # ----------------------------------------------------------------- linear algebra
    def matmul(self, out, a, b, trans_a=False, trans_b=False, bias=None, relu=False):
        """Batched out[i] = op(a[i]) @ op(b[i]) (+ bias) (relu).

        out: contiguous float32 [batch, M, N].
        a:   [batch, M, K], or [batch, K, M] when trans_a (then op(a) = a^T); b likewise [batch, K, N]
             or [batch, N, K] when trans_b. The last two dims of a and b are contiguous row-major;
             the batch stride (strides[0]) is the matrix size, or 0 to reuse one matrix for every batch.
        bias: optional contiguous [N], added to every row before relu.
        """
        raise NotImplementedError

    # ----------------------------------------------------------------- indexing
    def index_select(self, out, x, index):
        """out[o, k, i] = x[o, index[k], i]. x: [outer, size, inner] contiguous; index: contiguous int32 [K]."""
        raise NotImplementedError

    def index_select_backward(self, out, grad, index):
        """out[o, j, i] = sum of grad[o, k, i] over k with index[k] == j. out: [outer, size, inner]
        contiguous (every element written); grad: contiguous [outer, K, inner]."""
        raise NotImplementedError

    def gather(self, out, x, index):
        """out[o, k, i] = x[o, index[o, k, i], i]. x: contiguous [outer, size, inner]; index and out:
        contiguous [outer, K, inner], index int32."""
        raise NotImplementedError

    def gather_backward(self, out, grad, index):
        """out[o, j, i] = sum of grad[o, k, i] over k with index[o, k, i] == j. out contiguous [outer, size, inner]."""
        raise NotImplementedError

    # ----------------------------------------------------------------- random numbers
    def random(self, out, dist, seed, offset, a=0.0, b=1.0):
        """Counter-based random numbers, identical on every backend. out: contiguous.

        For element i, with c = offset + i (u32 arithmetic, wrapping), k = h(seed):
            bits(j) = h(h(j ^ k) + k)                  # h = lowbias32, see below
            uniform:  u = (bits(c) >> 8) * 2**-24         -> out = a + (b - a) * u      (float32)
            randint:  u as above                          -> out = a + floor(u * (b - a)) (int32)
            normal:   u1 = ((bits(2c) >> 8) + 1) * 2**-24, u2 = (bits(2c + 1) >> 8) * 2**-24
                      out = a + b * sqrt(-2 ln u1) * cos(2 pi u2)
        h(x): x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16  (all u32)
        """
        raise NotImplementedError

    # ----------------------------------------------------------------- fused loss
    def cross_entropy(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        """Per-row softmax cross-entropy. logits: contiguous float32 [rows, C]; target: int32 [rows];
        out: float32 [rows] = -(1-ls)*logp[t] - ls/C*sum(logp); 0 where target == ignore_index. out may be
        [rows, 2] instead: column 1 is then 1.0 where target != ignore_index, else 0.0 (the mean's divisor).
        A target outside [0, C) other than ignore_index raises IndexError (see webgrad/_bounds.py)."""
        raise NotImplementedError

    def cross_entropy_mean(self, out, logits, target, ignore_index=-100, label_smoothing=0.0):
        """reduction="mean" of cross_entropy: out float32 [2] = (the mean of the per-row losses over the rows
        whose target is not ignore_index, that count). The mean is NaN when every row is ignored (as
        PyTorch); the count is the backward's divisor. Errors as cross_entropy."""
        raise NotImplementedError

    def cross_entropy_backward(self, out, logits, target, grad, ignore_index=-100, label_smoothing=0.0):
        """out [rows, C] = grad[row] * (softmax(logits) - ((1-ls)*onehot(target) + ls/C)); 0 rows where
        target == ignore_index. grad: float32 [rows] (the upstream gradient of each row's loss)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- convolution and pooling
    # Geometry arguments are (height, width) pairs: kernel k, stride s, padding p, dilation d.
    # Images are contiguous NCHW float; OH = (H + 2p - d*(k-1) - 1) // s + 1 (likewise OW).
    # conv2d and its gradients, PyTorch's conv2d with one group. x: contiguous [N, C, H, W]; weight:
    # contiguous [O, C, kh, kw]; grad (of the output): contiguous [N, O, OH, OW]. A backend may build
    # them from im2col / col2im (unfolding patches) and matmul, or multiply without ever storing the
    # unfolded image: how is its own business (cpu.py and webgpu/conv.py each keep im2col/col2im
    # methods of the same signature, which the kernel tests compare).
    def conv2d(self, out, x, weight, bias, stride, padding, dilation, keep=False):
        """out [N, O, OH, OW] (contiguous): out[n, o, oh, ow] = bias[o] + sum over c, i, j of
        weight[o, c, i, j] * x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside the image).
        bias: contiguous [O] or None. keep: the weight gradient will follow; the backend may return a
        workspace (e.g. the unfolded image) for conv2d_backward_weight(..., workspace=) of the same x,
        else None."""
        raise NotImplementedError

    def conv2d_backward_input(self, out, grad, weight, stride, padding, dilation):
        """out [N, C, H, W] (contiguous, every element written): the gradient of conv2d with respect to
        x, i.e. the adjoint of conv2d without bias applied to grad."""
        raise NotImplementedError

    def conv2d_backward_weight(self, out, grad, x, stride, padding, dilation, workspace=None):
        """out [O, C, kh, kw] (contiguous): the gradient of conv2d with respect to the weight,
        out[o, c, i, j] = sum over n, oh, ow of grad[n, o, oh, ow] * x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw].
        workspace: what conv2d(..., keep=True) returned for this x, or None."""
        raise NotImplementedError

    def max_pool2d(self, out, indices, x, kernel, stride, padding, dilation):
        """out, indices: [N, C, OH, OW]; indices (int32) = h*W + w of the max within its plane (first
        on ties, padding never wins), as PyTorch's return_indices."""
        raise NotImplementedError

    def max_pool2d_backward(self, out, grad, indices, kernel=None, stride=None, padding=None, dilation=None):
        """out [N, C, H, W] (every element written) = sum of grad over the windows whose max it was.
        grad, indices: [N, C, OH, OW]. The window geometry, when given, is the forward's: a backend may
        use it (non-overlapping windows need no atomics); the indices alone determine the result."""
        raise NotImplementedError

    def avg_pool2d(self, out, x, kernel, stride, padding, count_include_pad=True):
        """Mean over each window; the divisor counts padding cells when count_include_pad."""
        raise NotImplementedError

    def avg_pool2d_backward(self, out, grad, kernel, stride, padding, count_include_pad=True):
        """out [N, C, H, W] (every element written): the adjoint of avg_pool2d."""
        raise NotImplementedError

    # ----------------------------------------------------------------- batch normalisation
    # x, out, grad: contiguous float [N, C, S] (S the spatial positions, 1 for [N, C]); per-channel
    # vectors (weight, bias, running_mean, running_var, grad_weight, grad_bias): contiguous [C] or None.
    # save: contiguous [2, C], the mean and invstd = 1 / sqrt(var + eps) that normalised x.
    def batch_norm(self, out, save, x, weight, bias, running_mean, running_var, training, momentum, eps,
                   count=None):
        """out = (x - mean[c]) * invstd[c] * weight[c] + bias[c] (weight 1 and bias 0 when None).
        training: mean and the biased variance over (N, S) of each channel, written to save; running_mean
        and running_var (both or neither) become (1 - m) * running + m * statistic, the variance unbiased
        (times M / (M - 1), M = N * S), m = momentum. count (BatchNorm's num_batches_tracked, an int32 [1]
        view, or None) is incremented by one, and momentum None means m = 1 / count after the increment
        (PyTorch's cumulative average), all on the device. Not training: running_mean and running_var
        normalise and are copied into save as (mean, invstd)."""
        raise NotImplementedError

    def batch_norm_backward(self, grad_input, grad_weight, grad_bias, grad, x, save, weight, training):
        """Gradients of batch_norm given grad (of out) and the forward's save; any output may be None.
        grad_weight = sum over (N, S) of grad * xhat, grad_bias = sum of grad, xhat = (x - mean) * invstd;
        training: grad_input = weight * invstd * (grad - mean(grad) - xhat * mean(grad * xhat)) (the
        statistics depend on x), else weight * invstd * grad."""
        raise NotImplementedError

    # ----------------------------------------------------------------- optimizer updates (in place)
    # One fused kernel per parameter: param, grad and state are contiguous views of one shape, updated
    # in place. `hyper` is a dict of Python floats/bools (lr, betas, step, ...); a backend may keep the
    # values that change every step (lr, step) in a small device buffer so recorded steps can replay.
    # A backend that has a `scalar(value)` method (WebGPU's dynamic scalars) receives hyper['lr'] and
    # hyper['step'] as its own scalar objects, which webgrad.optim rewrites only when they change.
    # hyper['skip_if'], when present and not None, is a one-element float32 view: where it holds a value above 0
    # the update changes nothing (GradScaler's skipped step, decided on the device without a read-back).
    # Adam's and RMSprop's hyper['skipped_steps'], given only with skip_if, is another: a skipped update adds 1
    # to it, and Adam's bias corrections use t = step - skipped_steps (the host's step count includes the
    # skipped steps). hyper['prepare'] True, given only to a backend with supports_capture (a recorded update
    # about to be replayed, Optimizer.prepare_replay): launch nothing, write this step's values where the
    # recorded update reads them.
    def sgd_step(self, param, grad, momentum_buffer, hyper):
        """PyTorch SGD. hyper: lr, momentum, dampening, weight_decay, nesterov, maximize, first.
        g = grad + weight_decay*param (negated first if maximize); with momentum:
        buf = g if hyper['first'] else momentum*buf + (1-dampening)*g; g = g + momentum*buf if nesterov
        else buf; param -= lr*g. momentum_buffer is None when momentum == 0."""
        raise NotImplementedError

    def adam_step(self, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, hyper):
        """PyTorch Adam / AdamW. hyper: lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled, step.
        g = grad (negated if maximize); step t = hyper['step'] (already incremented);
        AdamW: param *= 1 - lr*wd; Adam: g += wd*param. m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
        amsgrad: vmax = max(vmax, v) and v_used = vmax; param -= lr/(1-b1^t) * m / (sqrt(v_used/(1-b2^t)) + eps).
        max_exp_avg_sq is None unless amsgrad."""
        raise NotImplementedError

    def rmsprop_step(self, param, grad, square_avg, momentum_buffer, grad_avg, hyper):
        """PyTorch RMSprop. hyper: lr, alpha, eps, weight_decay, momentum, centered, maximize.
        g = grad (negated if maximize) + wd*param; sq = alpha*sq + (1-alpha)*g*g; centered: ga = alpha*ga +
        (1-alpha)*g and avg = sqrt(sq - ga*ga) + eps, else avg = sqrt(sq) + eps; momentum > 0:
        buf = momentum*buf + g/avg, param -= lr*buf; else param -= lr*g/avg."""
        raise NotImplementedError

    # ----------------------------------------------------------------- data augmentation (webgrad.transforms)
    # Images are contiguous [N, C, H, W] batches. Random parameters are drawn per sample from the stream
    # of `random` (u(c) = its uniform at counter c, with this seed), so every backend draws the same.
    def augment_crop_flip(self, out, x, seed, offset, pad, mode, fill, flip_p):
        """A random crop of the padded image, then a random horizontal flip, drawn per sample (torchvision's
        RandomCrop and RandomHorizontalFlip). x: [N, C, H, W] float32 or uint8; out: [N, C, OH, OW], x's dtype.
        pad = (left, top, right, bottom) gives the padded image [PH, PW]; mode in AUGMENT_PAD_MODES; fill is
        the constant mode's value. Sample n: top row i = floor(u(offset + 3n) * (PH - OH + 1)), left column
        j = floor(u(offset + 3n + 1) * (PW - OW + 1)), flipped when u(offset + 3n + 2) < flip_p (float32);
        out[n, c, y, v] = padded[n, c, i + y, j + (OW - 1 - v if flipped else v)]. seed, offset as `random`."""
        raise NotImplementedError

    def augment_affine(self, out, x, scale, shift, channels_last=False):
        """out[n, c, h, w] = x[n, c, h, w] * scale[c] + shift[c] in float32 (ToTensor and Normalize in one
        kernel). x: [N, C, H, W], or [N, H, W, C] when channels_last, float32 or uint8; out: float32
        [N, C, H, W]; scale, shift: C Python floats (at most AUGMENT_MAX_CHANNELS)."""
        raise NotImplementedError

    def augment_color(self, out, x, seed, offset, brightness, contrast, saturation):
        """ColorJitter drawn per image (torchvision's, without hue). x: [N, C, H, W] float32 or uint8, C 1 or
        3; out like x. brightness, contrast, saturation: (low, high) factor ranges ((1, 1): no change). Image n
        applies the three in the order AUGMENT_COLOR_ORDERS[floor(u(offset + 4n) * 6)] with factors
        f = low + (high - low) * u(offset + 4n + 1, + 2, + 3) (float32). Each is torchvision's blend
        clamp(f * a + (1 - f) * b) to [0, 1] (float) or [0, 255] (uint8, then truncated): brightness b = 0;
        contrast b = the mean over the image of gray(a); saturation b = gray(a) per pixel, where
        gray = 0.2989 r + 0.587 g + 0.114 b (truncated for uint8; a 1-channel image is its own gray, and
        saturation leaves it unchanged)."""
        raise NotImplementedError

    def augment_erase(self, out, x, seed, offset, p, scale, log_ratio, value):
        """RandomErasing drawn per image (torchvision's). x: [N, C, H, W] float32 or uint8; out like x. Image n is
        erased when u(c) < p, c = offset + 41n; then for attempt a = 0..9, with d = c + 1 + 4a (float32 math):
        area = H*W * (scale[0] + (scale[1] - scale[0]) * u(d)); r = exp(log_ratio[0] + (log_ratio[1] -
        log_ratio[0]) * u(d + 1)); h = round(sqrt(area * r)), w = round(sqrt(area / r)) (half to even); the
        first attempt with h < H and w < W sets rows i = floor(u(d + 2) * (H - h + 1)) .. i + h - 1 and columns
        j = floor(u(d + 3) * (W - w + 1)) .. j + w - 1 of every channel to `value`; none: unchanged."""
        raise NotImplementedError


# Padding modes of augment_crop_flip, as torchvision's RandomCrop: outside the image a pixel is `fill`, the
# nearest edge pixel, the mirror without the edge (d c b | a b c d | c b a) or with it (b a | a b c d | d c).
AUGMENT_PAD_MODES = ("constant", "edge", "reflect", "symmetric")
AUGMENT_MAX_CHANNELS = 16
# augment_color's orders of (0 brightness, 1 contrast, 2 saturation)
AUGMENT_COLOR_ORDERS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
