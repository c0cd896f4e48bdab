"""Recurrent layers: RNN, LSTM, GRU and their cells (as torch.nn), composed of existing ops.

Parameter names, shapes, gate order and initialisation are PyTorch's, so a state dict moves between the
two as is: layer k has weight_ih_l{k} [gates*hidden, input], weight_hh_l{k} [gates*hidden, hidden],
bias_ih_l{k}, bias_hh_l{k} (suffix "_reverse" for the backward direction); gates are (i, f, g, o) for
LSTM and (r, z, n) for GRU; every parameter starts as U(-1/sqrt(hidden), 1/sqrt(hidden)).

The input projection of a whole sequence is one matmul per layer and direction; only the recurrent
projection runs per time step (one matmul plus a few elementwise ops per step). Gradients come from the
ops. LSTM's proj_size is supported (h is projected by weight_hr_l{k} [proj_size, hidden]).

A PackedSequence input runs on its packed data as PyTorch's does: the sequences are sorted longest first, so
at step t the first batch_sizes[t] rows are the running ones; each step updates just those rows and the others
keep their state. A sequence's final state is therefore its state at its own last step (for the reverse
direction, after walking from its own last step back to step 0, since a row is untouched, still at h0, until
its last step comes), and the outputs of the steps, stacked in order, are the output's packed data.
"""

import math

from .._tensor import Tensor, empty, zeros
from ..ops.shape import cat, stack
from . import functional as F, init
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_cell(x_proj, h, w_hh, b_hh, nonlinearity):
    """One Elman step; x_proj is x W_ihᵀ + b_ih, already computed."""
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return pre.tanh() if nonlinearity == "tanh" else pre.relu()


def _lstm_cell(x_proj, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (x_proj + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else F.linear(h, w_hr)), c  # with proj_size, h is projected to proj_size


def _gru_cell(x_proj, h, w_hh, b_hh):
    xr, xz, xn = x_proj.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n)  # (1 - z) * n + z * h, with one op fewer


def _step(mode, x_proj, state, w_hh, b_hh, w_hr=None):
    if mode == "LSTM":
        return _lstm_cell(x_proj, state, w_hh, b_hh, w_hr)
    if mode == "GRU":
        return _gru_cell(x_proj, state, w_hh, b_hh)
    return _rnn_cell(x_proj, state, w_hh, b_hh, "tanh" if mode == "RNN_TANH" else "relu")


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if not (isinstance(dropout, (int, float)) and 0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size or hidden_size  # the size of h (the cell state c keeps hidden_size)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(directions):
                layer_input = input_size if layer == 0 else real_hidden * directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(empty(shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Accepted for PyTorch scripts (it packs cuDNN weights there); webgrad's weights need no packing."""

    @property
    def all_weights(self):
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        weights = [getattr(self, n) for n in self._flat_weights_names]
        return [weights[i:i + per] for i in range(0, len(weights), per)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        return s

    def _layer_weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _run(self, input, hx):
        """input [L, N, H_in] (time first); hx: [layers*dirs, N, H] (an (h, c) pair for LSTM).
        Returns the output [L, N, dirs*H] and the final state(s) in hx's layout."""
        lstm = self.mode == "LSTM"
        directions = 2 if self.bidirectional else 1
        h0, c0 = hx if lstm else (hx, None)
        h_last, c_last = [], []
        layer_input = input
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, direction)
                k = layer * directions + direction
                state = (h0[k], c0[k]) if lstm else h0[k]
                # the input projection of every time step at once: one matmul
                x_proj = F.linear(layer_input, w_ih, b_ih).unbind(0)
                steps = range(len(x_proj) - 1, -1, -1) if direction == 1 else range(len(x_proj))
                hs = [None] * len(x_proj)
                for t in steps:
                    state = _step(self.mode, x_proj[t], state, w_hh, b_hh, w_hr)
                    hs[t] = state[0] if lstm else state
                outs.append(stack(hs, 0))
                h_last.append(state[0] if lstm else state)
                if lstm:
                    c_last.append(state[1])
            layer_input = outs[0] if directions == 1 else cat(outs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h_n = stack(h_last, 0)
        return layer_input, ((h_n, stack(c_last, 0)) if lstm else h_n)

    def _run_packed(self, data, batch_sizes, hx):
        """data [sum(batch_sizes), H_in], the time steps one after another with the batch_sizes[t] sequences
        still running at step t (sorted longest first); hx in the sorted batch order.
        Returns the output's packed data [sum(batch_sizes), dirs*H] and the final state(s) in hx's layout."""
        lstm = self.mode == "LSTM"
        directions = 2 if self.bidirectional else 1
        batch = batch_sizes[0]
        h0, c0 = hx if lstm else (hx, None)
        h_last, c_last = [], []
        layer_input = data
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, direction)
                k = layer * directions + direction
                h, c = h0[k], (c0[k] if lstm else None)
                x_proj = F.linear(layer_input, w_ih, b_ih).split(batch_sizes, 0)
                steps = range(len(batch_sizes) - 1, -1, -1) if direction == 1 else range(len(batch_sizes))
                hs = [None] * len(batch_sizes)
                for t in steps:
                    n = batch_sizes[t]
                    h_run = h if n == batch else h[:n]
                    running = (h_run, c if n == batch else c[:n]) if lstm else h_run
                    state = _step(self.mode, x_proj[t], running, w_hh, b_hh, w_hr)
                    hs[t] = state[0] if lstm else state
                    # the finished (forward) or not yet started (reverse) rows keep their state
                    h = hs[t] if n == batch else cat([hs[t], h[n:]], 0)
                    if lstm:
                        c = state[1] if n == batch else cat([state[1], c[n:]], 0)
                outs.append(cat(hs, 0))
                h_last.append(h)
                if lstm:
                    c_last.append(c)
            layer_input = outs[0] if directions == 1 else cat(outs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h_n = stack(h_last, 0)
        return layer_input, ((h_n, stack(c_last, 0)) if lstm else h_n)

    def _initial_state(self, hx, batch, batched, like):
        """hx checked against [layers*dirs, batch, H] (an (h, c) pair for LSTM), zeros where None; an
        unbatched hx gets its batch dimension."""
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, batch, self.hidden_size)
        h_shape = shape[:2] + (self.proj_size or self.hidden_size,)
        lstm = self.mode == "LSTM"
        if hx is None:
            h = zeros(h_shape, dtype=like.dtype, device=like.device)
            return (h, zeros(shape, dtype=like.dtype, device=like.device)) if lstm else h
        parts = hx if lstm else (hx,)
        if lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0)")
        parts = tuple(p.unsqueeze(1) if not batched else p for p in parts)
        for p, expected in zip(parts, (h_shape, shape)):
            if tuple(p.shape) != expected:
                raise RuntimeError(f"Expected hidden size {tuple(expected)}, got {list(p.shape)}")
        return parts if lstm else parts[0]

    def _forward_packed(self, input, hx):
        data = input.data
        if data.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.ndim}")
        if data.shape[1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {data.shape[1]}")
        batch_sizes = [int(b) for b in input.batch_sizes.tolist()]
        lstm = self.mode == "LSTM"
        order, back = input.sorted_indices, input.unsorted_indices
        if hx is not None and order is not None:  # hx comes in the caller's batch order
            hx = self._initial_state(hx, batch_sizes[0], True, data)
            hx = tuple(s.index_select(1, order) for s in hx) if lstm else hx.index_select(1, order)
        hx = self._initial_state(hx, batch_sizes[0], True, data)
        output, state = self._run_packed(data, batch_sizes, hx)
        if back is not None:
            state = tuple(s.index_select(1, back) for s in state) if lstm else state.index_select(1, back)
        return PackedSequence(output, input.batch_sizes, order, back), state

    def forward(self, input, hx=None):
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected the input to be a Tensor or a PackedSequence, got "
                            f"{type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[2] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[2]}")
        lstm = self.mode == "LSTM"
        hx = self._initial_state(hx, input.shape[1], batched, input)
        output, state = self._run(input, hx)
        if not batched:
            output = output.squeeze(1)
            state = tuple(s.squeeze(1) for s in state) if lstm else state.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, state


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh) (or relu). Its repr is RNNBase's, which
    leaves the nonlinearity out, as PyTorch's (RNN(3, 4) with relu too); RNNCell's names it."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, proj_size=0):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, proj_size, device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory; forward returns (output, (h_n, c_n))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit; forward returns (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, proj_size=0):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return s if nonlinearity == "tanh" else s + f", nonlinearity={nonlinearity}"

    def _prepare(self, input, hx, pair):
        """(input as [N, H_in], hx as [N, H] (or a pair of them), batched?)."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} expected {self.input_size}")
        if hx is None:
            h = zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            hx = (h, zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)) if pair else h
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx) if pair else hx.unsqueeze(0)
        return input, hx, batched

    def _project(self, input):
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, batched = self._prepare(input, hx, False)
        h = _rnn_cell(self._project(input), hx, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, batched = self._prepare(input, hx, True)
        h, c = _lstm_cell(self._project(input), hx, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, hx, batched = self._prepare(input, hx, False)
        h = _gru_cell(self._project(input), hx, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
