"""Neural-network building blocks (webgrad.nn), as torch.nn."""

from . import functional, init, utils  # noqa: F401
from .activation import GELU, LogSoftmax, Softmax, Softmax2d  # noqa: F401
from .activation import TABLE_MODULES as _TABLE_MODULES
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .feature_dropout import Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .instancenorm import GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .functional_linear_ce import LinearCrossEntropyOptions  # noqa: F401  (F.linear_cross_entropy's chunking)
from .fractional_pool import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: F401
from .lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,  # noqa: F401
                   LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
                   LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, CTCLoss, HuberLoss, L1Loss, MSELoss,  # noqa: F401
                   NLLLoss, SmoothL1Loss)
from .module import Module  # noqa: F401
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm, SyncBatchNorm  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,  # noqa: F401
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                      ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from .parameter_containers import ParameterDict, ParameterList  # noqa: F401
from .prelu import PReLU  # noqa: F401
from .alpha_dropout import AlphaDropout, FeatureAlphaDropout  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .pooling import AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, MaxPool3d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,  # noqa: F401
                          TransformerEncoderLayer)
from .upsampling import (PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d,  # noqa: F401
                         UpsamplingNearest2d)

from .layers_more import *  # noqa: F401,F403  (Conv1d, MaxPool1d, RMSNorm, KLDivLoss, ...: its __all__)

# ReLU, Sigmoid, Tanh, SiLU, ELU, Hardswish, ...: one Module per op-table record (nn/activation.py).
globals().update(_TABLE_MODULES)
