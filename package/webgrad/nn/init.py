"""nn.init: in-place initialisers, as torch.nn.init.

Values are drawn on the tensor's own device by webgrad.random's counter-based generator (Tensor.uniform_ /
normal_), so initialising a model on WebGPU uploads nothing. Every function runs under no_grad, since
parameters are leaves that require grad.
"""

import math
import warnings

from .._autograd import no_grad
from ..ops.elementwise import where


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (scales the std of kaiming/xavier initialisation)."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out): weight [out, in, *kernel] -> (in * prod(kernel), out * prod(kernel))."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def _default_weight_and_bias_(weight, bias):
    """PyTorch's default initialisation of Linear and the convolutions: kaiming_uniform_(a=sqrt(5)), which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias (if any) from the same range."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b] by inverse-CDF sampling, as PyTorch: u uniform between the
    CDF values of a and b, then x = mean + std * sqrt(2) * erfinv(2u - 1), all on the device."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with no_grad():
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        value = _erfinv(tensor.clamp(-1 + 1e-7, 1 - 1e-7)) * (std * math.sqrt(2.0)) + mean
        return tensor.copy_(value.clamp(a, b))


def _erfinv(x):
    """erfinv from elementwise ops (M. Giles, "Approximating the erfinv function", 2010; ~1e-7 relative
    error, float32 accuracy). Both branches are evaluated and `where` picks one."""
    w = -((1.0 - x) * (1.0 + x)).log()
    central = w - 2.5
    p = central * 2.81022636e-08 + 3.43273939e-07
    for c in (-3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p = p * central + c
    tail = w.sqrt() - 3.0
    q = tail * -0.000200214257 + 0.000100950558
    for c in (0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        q = q * tail + c
    return where(w < 5.0, p, q) * x


def orthogonal_(tensor, gain=1, generator=None):
    """Fill `tensor` (2 or more dims, flattened to [size(0), rest]) with a (semi-)orthogonal matrix times gain, as
    PyTorch: Q of the QR decomposition of a standard normal matrix (drawn on the tensor's device, as normal_
    draws), its columns' signs those of R's diagonal, so Q is unique. The QR runs on the host in float64:
    NumPy's (LAPACK) where NumPy is present, else Householder reflections in Python (Pyodide without NumPy;
    O(rows * cols**2) steps, seconds for a few hundred columns)."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor  # no-op
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        drawn = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
        a = drawn.double().tolist() if tensor.device.type == "cpu" else drawn.tolist()
        if rows < cols:
            a = [list(c) for c in zip(*a)]  # QR of the transpose: Q's rows orthonormal
        q = _orthonormal_columns(a)
        if rows < cols:
            q = [list(c) for c in zip(*q)]
        tensor.copy_(tensor.new_tensor(q).reshape(tuple(tensor.shape)))
        tensor.mul_(gain)
    return tensor


def _orthonormal_columns(a):
    """Q (m x n, m >= n, nested lists) of a = QR with R's diagonal made non-negative (a zero one zeroes its
    column, as torch's q * sign(diag(r)))."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        q, r = np.linalg.qr(np.asarray(a, dtype=np.float64))
        return (q * np.sign(np.diag(r))).tolist()
    m, n = len(a), len(a[0])
    cols = [[a[i][j] for i in range(m)] for j in range(n)]
    reflectors, diag = [], []
    for k in range(n):
        x = cols[k][k:]
        alpha = math.sqrt(sum(v * v for v in x))
        s = -math.copysign(alpha, x[0])
        v = list(x)
        v[0] -= s
        vv = sum(t * t for t in v)
        reflectors.append((v, vv))
        diag.append(s if vv else x[0])
        if vv:
            for j in range(k, n):
                c = cols[j]
                f = 2.0 * sum(v[i] * c[k + i] for i in range(len(v))) / vv
                for i in range(len(v)):
                    c[k + i] -= f * v[i]
    q = [[1.0 if i == j else 0.0 for i in range(m)] for j in range(n)]  # columns of Q, built from the right
    for k in range(n - 1, -1, -1):
        v, vv = reflectors[k]
        if not vv:
            continue
        for c in q:
            f = 2.0 * sum(v[i] * c[k + i] for i in range(len(v))) / vv
            for i in range(len(v)):
                c[k + i] -= f * v[i]
    signs = [(d > 0) - (d < 0) for d in diag]
    return [[q[j][i] * signs[j] for j in range(n)] for i in range(m)]


def eye_(tensor):
    """Fill a 2-D `tensor` with the identity matrix (ones on the main diagonal of a rectangle too), as
    torch.nn.init.eye_: a Linear layer so initialised passes as many of its inputs through as it can."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from .._tensor import eye
    with no_grad():
        tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))
    return tensor


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D convolution weight [out, in, *kernel] with the Dirac delta, as torch.nn.init.dirac_:
    zeros but a 1 at the kernel's centre for output channel d of each group and input channel d, so the
    convolution passes as many input channels through as it can (per group where groups > 1)."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    from .._tensor import eye
    per_group = tensor.shape[0] // groups
    channels = min(per_group, tensor.shape[1])
    centre = tuple(size // 2 for size in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        identity = eye(channels, dtype=tensor.dtype, device=tensor.device)
        for g in range(groups):  # one block write per group
            tensor[(slice(g * per_group, g * per_group + channels), slice(0, channels)) + centre] = identity
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D `tensor` from N(0, std) and zero ceil(sparsity * rows) elements of each column, at rows drawn
    without replacement, as torch.nn.init.sparse_. The rows of every column come from one argsort of uniform
    numbers drawn on the tensor's device (a random permutation per column), so no column is visited in Python."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    from ..random import rand
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        if num_zeros and cols:
            order = rand(rows, cols, device=tensor.device, generator=generator).argsort(dim=0)
            tensor.scatter_(0, order[:num_zeros], 0.0)
    return tensor

def _deprecated(initialiser):
    """The name without the trailing underscore that PyTorch still accepts, with its FutureWarning."""
    new_name = initialiser.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.", FutureWarning,
                      stacklevel=2)
        return initialiser(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"{old_name}(...): deprecated; see nn.init.{new_name}."
    return deprecated_init


# the names without the underscore, which scripts written before PyTorch 0.4 call
uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
sparse = _deprecated(sparse_)
