"""Dropout1d, Dropout2d, Dropout3d: channel-wise dropout (a whole channel of a sample zeroed at once, one
draw per channel made on the device), active in training mode, the identity in eval mode."""

from . import functional as F
from .dropout import Dropout


class Dropout1d(Dropout):
    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)
