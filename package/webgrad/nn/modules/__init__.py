"""torch.nn.modules and its submodules (torch.nn.modules.conv, .linear, .loss, ...): PyTorch's module paths,
for scripts that import from them (`from torch.nn.modules.module import Module`,
`from torch.nn.modules.batchnorm import _BatchNorm`, `from torch.nn.modules.utils import _pair`).

webgrad keeps its layers in webgrad.nn's own files; here each of PyTorch's submodules answers PyTorch's
names for it with webgrad.nn's objects, looked up when asked, so a layer webgrad.nn gains is found here
too. A name PyTorch has in a submodule and webgrad lacks raises AttributeError naming it (in
`from ... import`, Python reports it as "cannot import name"). `utils` is a real module of helpers.
"""

import importlib
import importlib.machinery
import sys
import types

from . import utils

# PyTorch's public names in each submodule of torch.nn.modules (its __all__)
PUBLIC = {
    "activation": "Threshold ReLU RReLU Hardtanh ReLU6 Sigmoid Hardsigmoid Tanh SiLU Mish Hardswish ELU CELU SELU "
                  "GLU GELU Hardshrink LeakyReLU LogSigmoid Softplus Softshrink MultiheadAttention PReLU Softsign "
                  "Tanhshrink Softmin Softmax Softmax2d LogSoftmax",
    "adaptive": "AdaptiveLogSoftmaxWithLoss",
    "batchnorm": "BatchNorm1d LazyBatchNorm1d BatchNorm2d LazyBatchNorm2d BatchNorm3d LazyBatchNorm3d SyncBatchNorm",
    "channelshuffle": "ChannelShuffle",
    "container": "Container Sequential ModuleList ModuleDict ParameterList ParameterDict",
    "conv": "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d "
            "LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d",
    "distance": "PairwiseDistance CosineSimilarity",
    "dropout": "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout",
    "flatten": "Flatten Unflatten",
    "fold": "Fold Unfold",
    "instancenorm": "InstanceNorm1d InstanceNorm2d InstanceNorm3d LazyInstanceNorm1d LazyInstanceNorm2d "
                    "LazyInstanceNorm3d",
    "lazy": "LazyModuleMixin",
    "linear": "Bilinear Identity LazyLinear Linear",
    "loss": "L1Loss NLLLoss NLLLoss2d PoissonNLLLoss GaussianNLLLoss KLDivLoss MSELoss BCELoss BCEWithLogitsLoss "
            "HingeEmbeddingLoss MultiLabelMarginLoss SmoothL1Loss HuberLoss SoftMarginLoss CrossEntropyLoss "
            "MultiLabelSoftMarginLoss CosineEmbeddingLoss MarginRankingLoss MultiMarginLoss TripletMarginLoss "
            "TripletMarginWithDistanceLoss CTCLoss",
    "module": "Module register_module_forward_pre_hook register_module_forward_hook "
              "register_module_full_backward_pre_hook register_module_backward_hook "
              "register_module_full_backward_hook register_module_buffer_registration_hook "
              "register_module_module_registration_hook register_module_parameter_registration_hook",
    "normalization": "LocalResponseNorm CrossMapLRN2d LayerNorm GroupNorm RMSNorm",
    "padding": "CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d "
               "ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d ZeroPad1d "
               "ZeroPad2d ZeroPad3d",
    "pixelshuffle": "PixelShuffle PixelUnshuffle",
    "pooling": "MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d AvgPool1d AvgPool2d AvgPool3d "
               "FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d LPPool3d AdaptiveMaxPool1d "
               "AdaptiveMaxPool2d AdaptiveMaxPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d",
    "rnn": "RNNBase RNN LSTM GRU RNNCellBase RNNCell LSTMCell GRUCell",
    "sparse": "Embedding EmbeddingBag",
    "transformer": "Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer",
    "upsampling": "Upsample UpsamplingNearest2d UpsamplingBilinear2d",
}

# Private names model code imports from these paths, where webgrad has the same thing: name -> its module.
PRIVATE = {
    "batchnorm": {"_BatchNorm": "webgrad.nn.normalization"},
    "conv": {"_single": "webgrad.nn.modules.utils", "_pair": "webgrad.nn.modules.utils",
             "_triple": "webgrad.nn.modules.utils", "_reverse_repeat_tuple": "webgrad.nn.modules.utils"},
    "container": {"_addindent": "webgrad.nn.module"},
    "instancenorm": {"_InstanceNorm": "webgrad.nn.instancenorm"},
    "lazy": {"LazyModuleMixin": "webgrad.nn.lazy"},  # torch.nn does not export it: only its module path
    "linear": {"NonDynamicallyQuantizableLinear": "webgrad.nn.linear"},
    "loss": {"_Loss": "webgrad.nn.loss", "_WeightedLoss": "webgrad.nn.loss"},
    "module": {"_addindent": "webgrad.nn.module", "_IncompatibleKeys": "webgrad.nn.module",
               "register_module_forward_pre_hook": "webgrad.nn.module",
               "register_module_forward_hook": "webgrad.nn.module"},
    "padding": {"_ConstantPadNd": "webgrad.nn.padding"},
    "pooling": {"_single": "webgrad.nn.modules.utils", "_pair": "webgrad.nn.modules.utils",
                "_triple": "webgrad.nn.modules.utils"},
    "transformer": {"_get_activation_fn": "webgrad.nn.transformer", "_get_clones": "webgrad.nn.modules.utils"},
}


def _lookup(path, name, public, private):
    if name in private:
        return getattr(importlib.import_module(private[name]), name)
    if name in public:
        nn = importlib.import_module("webgrad.nn")
        if hasattr(nn, name):
            return getattr(nn, name)
        raise AttributeError(f"module {path!r} has no attribute {name!r}: webgrad.nn has no {name} yet "
                             "(FEATURES.md lists what it has)")
    raise AttributeError(f"module {path!r} has no attribute {name!r}")


def _submodule(short):
    path = f"{__name__}.{short}"
    public, private = frozenset(PUBLIC[short].split()), PRIVATE.get(short, {})
    module = types.ModuleType(path, f"torch.nn.modules.{short}: webgrad.nn's objects under PyTorch's module path "
                                    "(see webgrad.nn.modules).")
    module.__getattr__ = lambda name: _lookup(f"torch.nn.modules.{short}", name, public, private)
    module.__dir__ = lambda: sorted(n for n in public | set(private) if hasattr(module, n))
    nn = importlib.import_module("webgrad.nn")
    module.__all__ = [n for n in PUBLIC[short].split() if hasattr(nn, n) or n in private]  # what `import *` gives
    module.__spec__ = importlib.machinery.ModuleSpec(path, None)
    sys.modules[path] = module  # so that `import webgrad.nn.modules.conv` finds it
    return module


for _short in PUBLIC:
    globals()[_short] = _submodule(_short)

_ALL_PUBLIC = frozenset(n for names in PUBLIC.values() for n in names.split())


def __getattr__(name):  # torch.nn.modules.Linear and the like: every public name of the submodules
    return _lookup("torch.nn.modules", name, _ALL_PUBLIC, {})
