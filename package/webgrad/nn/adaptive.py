"""nn.AdaptiveLogSoftmaxWithLoss, as torch.nn.AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax
approximation for GPUs"): frequent classes (the shortlist) are scored by the head, rare ones by a small
two-layer tail per cluster, weighted by the head's score for that cluster.

The parameters are PyTorch's (head.weight [, head.bias], tail.<i>.0.weight, tail.<i>.1.weight), so a torch
state_dict loads. PyTorch runs each tail only on the rows whose target falls in its cluster, which takes a
host read per cluster to find them; here every tail runs on every row and a mask keeps the rows of its cluster,
so the forward stays on the device (one read remains: the check that targets are in range).
"""

from collections import namedtuple

from .._tensor import Tensor
from ..ops.shape import cat
from . import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """forward(input, target) -> (output, loss): output[i] the log-probability of target[i], loss the mean of
    -output. log_prob(input): every class's log-probability; predict(input): the most likely class."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 or \
                len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        if not isinstance(input_, Tensor) or not isinstance(target_, Tensor):
            raise TypeError("AdaptiveLogSoftmaxWithLoss.forward expects tensors for input and target")
        if target_.ndim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if bool(((target < 0) | (target >= self.n_classes)).any()):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        gather_inds = target
        local_logprob = None  # the log-probability within its cluster, for rows whose target is in a tail
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            in_cluster = (target >= low) & (target < high)
            relative = (target - low).clamp(0, high - low - 1)
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            picked = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)
            masked = picked.where(in_cluster, 0.0)
            local_logprob = masked if local_logprob is None else local_logprob + masked
            gather_inds = gather_inds.masked_fill(in_cluster, self.shortlist_size + i)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        if local_logprob is not None:
            output = local_logprob + output
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        """The log-probability of every class, [N, n_classes], given the head's output for input."""
        head_logprob = F.log_softmax(head_output, dim=1)
        pieces = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            pieces.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(pieces, 1)

    def log_prob(self, input):
        """log-probabilities of all n_classes classes: input [N, in_features] -> [N, n_classes]."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row, as log_prob(input).argmax(dim=1); the tails run only when the
        head's best score is a cluster's for some row."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        in_tail = output >= self.shortlist_size
        if not bool(in_tail.any()):
            return output
        full = self._get_full_log_prob(input, head_output).argmax(dim=1)
        return full.where(in_tail, output)
