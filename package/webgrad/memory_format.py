"""torch's memory formats: webgrad.contiguous_format, preserve_format, channels_last.

webgrad keeps every tensor it allocates in row-major (contiguous) order, so the formats are accepted
where PyTorch takes memory_format= (clone, contiguous, to, empty_like ...) and give that layout: values
are identical; only strides can differ from PyTorch's for channels_last.
"""


class memory_format:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"webgrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


def _by_name(name):
    return globals()[name]
