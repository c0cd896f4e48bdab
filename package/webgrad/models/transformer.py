"""A sequence classifier of one transformer encoder block, the scale benchmark's: nn.TransformerEncoderLayer
(post-norm, ReLU, batch_first), the mean over the sequence, then a Linear to the classes. A sample is a
(sequence, d_model) matrix: 128 x 256 by default (4 heads, a 4 x d_model feed-forward). Dropout is 0: the
benchmark times the block's arithmetic, and webgrad and PyTorch then compute the same function from the
same weights. State_dict names: block.* (PyTorch's TransformerEncoderLayer's) and fc.*.
"""

import webgrad.nn as _webgrad_nn

from .registry import check_classes, register

SEQUENCE_SHAPE = (128, 256)

_DEFINED = {}  # id(nn namespace) -> its class (each namespace's is made once)


def _define(nn):
    key = id(nn)
    if key not in _DEFINED:
        class EncoderClassifier(nn.Module):
            """One encoder block, the mean over the sequence, a linear classifier."""

            def __init__(self, d_model, nhead, dim_feedforward, num_classes, device=None):
                super().__init__()
                self.block = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                                        batch_first=True, device=device)
                self.fc = nn.Linear(d_model, num_classes, device=device)

            def forward(self, x):
                return self.fc(self.block(x).mean(1))

        _DEFINED[key] = EncoderClassifier
    return _DEFINED[key]


@register("transformer", SEQUENCE_SHAPE)
def transformer(input_shape=SEQUENCE_SHAPE, num_classes=10, nhead=4, dim_feedforward=1024, device=None, nn=None):
    """The encoder-block classifier for samples of `input_shape` (sequence, d_model: the block's width is the
    last) and `num_classes` classes."""
    shape = tuple(input_shape)
    if len(shape) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
        raise ValueError(f"transformer takes sequences: input_shape must be (sequence, d_model) of positive whole "
                         f"numbers, got {input_shape!r}")
    check_classes(num_classes, "transformer")
    return _define(nn or _webgrad_nn)(shape[1], nhead, dim_feedforward, num_classes, device=device)
