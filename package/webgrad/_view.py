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
