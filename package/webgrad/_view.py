"""View: the strided window onto a backend storage that every kernel reads or writes.

It sits below both the Tensor and the backends, so neither has to import the other to name it.
"""


class View:
    """A strided window onto a storage: what a kernel reads or writes.

    shape, strides: tuples of ints (strides in elements, may be 0 for broadcast);
    offset: first element's index in the storage; dtype: a webgrad DType.
    """

    __slots__ = ("storage", "shape", "strides", "offset", "dtype")

    def __init__(self, storage, shape, strides, offset, dtype):
        self.storage = storage
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self.dtype = dtype

    @staticmethod
    def contiguous_strides(shape):
        if type(shape) is tuple:
            try:
                info = _DENSE.get(shape)
            except TypeError:  # unhashable sizes: computed below
                info = None
            if info is not None:
                return info[0]
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        return tuple(reversed(strides))

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self):
        # First the strides a contiguous view of this shape has, cached per shape: a training step asks
        # ~50 times, for few shapes, and in Pyodide (CPython in WebAssembly) the loop below costs ~1.8 us
        # a call against ~0.3 for the lookup. The loop then settles the rest (size-1 dims' strides are free).
        if self.strides == _dense(self.shape)[0]:
            return True
        expect = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def reshaped(self, shape):
        """The same contiguous data seen with another shape (self must be contiguous)."""
        return View(self.storage, shape, View.contiguous_strides(shape), self.offset, self.dtype)

    def __repr__(self):
        return f"View(shape={self.shape}, strides={self.strides}, offset={self.offset}, {self.dtype})"


_DENSE = {}  # shape -> (its contiguous strides, its element count or 0 if any dim is < 1): see _dense


def _dense(shape):
    """(contiguous strides, numel) of a shape tuple, numel 0 when a dim is zero or negative; cached (at most
    4096 shapes), since kernels check the same few shapes over and over (is_contiguous, views.check_view)."""
    try:
        info = _DENSE.get(shape)
    except TypeError:  # an unhashable size (a NumPy 0-d array, say): computed, not cached
        info = None
        shape = tuple(int(n) for n in shape)
    if info is None:
        numel = 1
        for n in shape:
            numel *= n
        if any(n < 1 for n in shape):
            numel = 0
        info = (View.contiguous_strides(shape), numel)
        if len(_DENSE) < 4096:
            _DENSE[shape] = info
    return info
