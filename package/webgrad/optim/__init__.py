"""Optimizers and learning-rate schedulers (webgrad.optim), as torch.optim.

    opt = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    sched = webgrad.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=1000)
    loss.backward(); opt.step(); sched.step(); opt.zero_grad()
"""

from . import lr_scheduler  # noqa: F401
from . import swa_utils  # noqa: F401
from .adafactor import Adafactor  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .asgd import ASGD  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .nadam import NAdam  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .radam import RAdam  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .rprop import Rprop  # noqa: F401
from .sgd import SGD  # noqa: F401
from .sparse_adam import SparseAdam  # noqa: F401
