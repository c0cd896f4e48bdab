"""nn.AlphaDropout and nn.FeatureAlphaDropout: alpha dropout in training mode, the identity in eval mode."""

from .dropout import Dropout
from .random_functional import alpha_dropout, feature_alpha_dropout


class AlphaDropout(Dropout):
    """Alpha dropout in training mode, the identity in eval mode, as torch.nn.AlphaDropout."""

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    """Channel-wise alpha dropout in training mode, as torch.nn.FeatureAlphaDropout."""

    def forward(self, input):
        return feature_alpha_dropout(input, self.p, self.training)
