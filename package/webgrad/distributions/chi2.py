"""Chi2(df): Gamma(df / 2, 1 / 2), as torch.distributions.Chi2."""

from .._tensor import Size
from . import constraints
from .gamma import Gamma


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        from .utils import broadcast_all
        (df,) = broadcast_all(df) if not hasattr(df, "shape") else (df,)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(Size(batch_shape), new)

    @property
    def df(self):
        return self.concentration * 2
