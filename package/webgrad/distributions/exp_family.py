"""ExponentialFamily, as torch.distributions.ExponentialFamily: the base of distributions whose density is
exp(<t(x), theta> - F(theta) + k(x)). A member gives its natural parameters theta, its log-normaliser F and the
expected carrier measure E[k(x)]; entropy (here) and KL divergence within one family (kl.py) then follow from the
Bregman divergence of F, whose gradient autograd computes."""

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        """The natural parameters theta, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        """F(theta), of the batch shape."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        """E[k(x)]."""
        raise NotImplementedError

    def entropy(self):
        """H = F(theta) - <theta, grad F(theta)> - E[k(x)], at detached natural parameters, as PyTorch's: no
        gradient reaches the distribution's parameters (a member that needs one overrides entropy)."""
        result = -self._mean_carrier_measure
        natural_params, log_normalizer, gradients = _log_normalizer_and_gradient(self)
        result = result + log_normalizer
        for theta, grad in zip(natural_params, gradients):
            result = result - (theta * grad).reshape(*self._batch_shape, -1).sum(-1)
        return result


def _log_normalizer_and_gradient(dist):
    """dist's natural parameters (detached leaves), F at them and grad F. PyTorch takes grad F with create_graph, but
    the leaves are detached, so that graph reaches no parameter of the distribution: the gradient is taken plainly
    (which also serves log-normalisers whose ops have no second derivative here, such as Wishart's slogdet)."""
    from .. import autograd, enable_grad
    with enable_grad():
        natural_params = [p.detach().requires_grad_() for p in dist._natural_params]
        log_normalizer = dist._log_normalizer(*natural_params)
        gradients = autograd.grad(log_normalizer.sum(), natural_params)
    return natural_params, log_normalizer, gradients
