"""Epilogue fusion in a captured step: batch norm's normalize4, then a residual add, then ReLU, become one
dispatch (batch_norm.wgsl's normalize4_act) when the values between them are used by nothing else; so do a
gradient's add and the backward op that reads the sum (elementwise.wgsl's add_unary_backward4), and ReLU's
backward folds into a Winograd input gradient's output transform (winograd.wgsl's wino_output with MASK).

Eager ops cannot fuse these: when batch_norm runs, nothing says whether its output will be read again (a
user's `y = bn(x)` may be logged, returned or used twice). A captured step (Runtime.capture, replay.py) is
known whole at its seal: every record, the storages it bound, and which of them outlive the step. So there,
ResNet's `relu(bn(conv(x)))` and `relu(bn(conv(y)) + shortcut)` each become one pass that reads the
convolution's output (and the shortcut) and writes the ReLU's output, instead of two or three passes through
memory. Each rounds as the separate passes did, so a replay computes what the recorded step computed.

A chain normalize4 -> [add] -> [relu] (at least one of the two) is fused where:
- each value it passes on (batch norm's output; the sum, when ReLU follows) is bound by exactly its producer
  and its consumer in the whole step, and no storage holding it outlives the capture;
- the ops are the float32 vec4 kernels over the whole tensor (a training normalize4; unary4 relu; binary4
  add of two operands, neither read in place);
- the fused dispatch takes the place of the chain's last record, so the records it passes over must not write
  what the chain reads, nor touch what it writes (buffer by buffer, copies counting as both).

In the backward pass, a gradient accumulation's add (a tensor read twice: a ResNet block's input, by its first
convolution and by the shortcut) followed by the backward of the op that made the tensor (the ReLU before the
block), the sum read by nothing else, becomes one add_unary_backward4 dispatch at the backward's place, under the
same rules (grad_chain). It reads both gradients and the ReLU's output and writes the ReLU's input gradient:
four passes through memory instead of six. And a ReLU's backward whose gradient only a Winograd input gradient's
output transforms wrote (a ResNet block's inner ReLU: conv2's input gradient) folds into those transforms
(masked_output: wino_output's MASK): each chunk writes its values where the ReLU's output is > 0, else 0,
straight into the backward's output, and the backward's pass is gone. The convolution's backward takes the
weight gradient first (ops/conv.py), so that the input gradient's chunks are the last to read dY, whose buffer
the backward's output may have taken: each chunk reads its images of dY before it writes the same images.

An optimizer's step is one small dispatch per parameter (optim.py's sgd4), and each costs about as much as a
dispatch's start and drain however small the parameter. Consecutive sgd4 records alike but for their parameter
(the same flags, the same skip flag, every buffer distinct) become one sgd4_group dispatch (optim_group.wgsl) of
up to optim.group_size members, at the last one's place: nothing runs between them. Only where sgd4 does one
vec4 a thread (a GPU's variant), as sgd4_group does. Its graph counts them in `grouped`.

Hand-written attention (a GPT's `att = (q @ k^T) * scale`, `att.masked_fill(mask, -inf)`, `softmax(att, -1)`,
`attn_dropout(att)`): eagerly, F.softmax of a masked_fill's result is already one softmax_masked dispatch reading
the masked_fill's input (ops/masked.py). At the seal, first every dispatch whose results nothing reads is dropped
(dead: each storage it writes is read by no later record and does not outlive the capture, and it reports no
error): the masked_fill's. Then the softmax_masked record takes in the `* scale` before it (an affine x * a whose
result only it reads: it reads x and scales by a) and the dropout after it (it writes the dropped weights too, at
the dropout's place); its backward takes in the dropout's backward before it and the scale's after it. The chain's
four or five passes over [B, H, T, T] forward and four backward become one each. graph.dead counts the dropped
dispatches; the chains count in graph.fused.

A linear layer's product followed by GELU (a GPT's MLP, `gelu(c_fc(x))`; F.gelu(F.linear(...)) or nn.GELU() after
nn.Linear) becomes one dispatch: the product's epilogue (matmul.wgsl's act_store, the op table's gelu or gelu_tanh
code) writes gelu of each output into the GELU's output as well, and the GELU's pass is gone (linear_activation).
The product keeps writing its own output, the pre-activation, which GELU's backward reads. Where the product's K is
split across workgroups, the reduction that writes its output takes the epilogue. Both float32 and float16 (under
autocast: the half product, then the half GELU).

The bench (`python -m webgrad.bench replay --models resnet18`) shows the step's dispatch count with and
without it (WEBGRAD_FUSE=0).
"""

import functools

from . import batch_norm, dropout, elementwise, matmul, matmul_plan, optim, softmax_masked, winograd
from .elementwise import BINARY, HALF8, UNARY, UNARY_BACKWARD, VEC4
from .cast_folding import fold_casts
from .dispatch import dtype_code
from ...dtypes import float32

_F32 = dtype_code(float32)


def _modes(trace_record):
    """Per storage binding of the record: "read" or "write" (a copy or an upload: "write", both)."""
    launch = trace_record.launch
    if launch is None:
        return ("write",) * len(trace_record.buffers)
    return tuple(mode for _, mode in launch.kernel.bindings if mode != "uniform")


def _elementwise_op(trace_record, kernel, names):
    """(op name, n, offsets (out, then each input's)) of a float32 vec4 `kernel` record (unary4, binary4 or
    unary_backward4) whose op is one of `names` and reads no operand in place; else None."""
    launch = trace_record.launch
    if launch is None or launch.kernel is not kernel or launch.params is None:
        return None
    c = dict(launch.constants)
    codes = elementwise.ops()
    table, inputs = {VEC4[BINARY]: (codes.binary, 2), VEC4[UNARY]: (codes.unary, 1),
                     VEC4[UNARY_BACKWARD]: (codes.backward, 3)}[kernel]
    op = next((n for n in names if table.get(n) == c.get("OP")), None)
    if (op is None or c.get("INT_MATH") or c.get("OUT_DTYPE") != _F32
            or any(c.get(f"IN{k}_FROM_OUT") or c.get(f"IN{k}_DTYPE") != _F32 for k in range(inputs))):
        return None
    fields = elementwise._PARAMS.unpack(launch.params)
    return op, fields[0], fields[8:9 + inputs]


def _activation_op(trace_record, names):
    """(op name, n, (out offset, input offset)) of a unary record, float32 vec4 or float16 (unary_h8), whose op is
    one of `names`, reading its input from a binding of its own; else None."""
    found = _elementwise_op(trace_record, VEC4[UNARY], names)
    if found is not None:
        return found
    launch = trace_record.launch
    if launch is None or launch.kernel is not HALF8[UNARY] or launch.params is None:
        return None
    c = dict(launch.constants)
    codes = elementwise.ops().unary
    op = next((n for n in names if codes.get(n) == c.get("OP")), None)
    if op is None or c.get("IN0_FROM_OUT"):
        return None
    fields = elementwise._PARAMS.unpack(launch.params)
    return op, fields[0], fields[8:10]


def clear_between(trace, start, end, chain, reads, writes):
    """Whether the records of `trace` strictly between start and end (the chain's own aside) leave the buffers
    `reads` unwritten and the buffers `writes` untouched: then a record at start may run at end instead."""
    for k in range(start + 1, end):
        if k in chain:
            continue
        t = trace[k]
        for buffer, mode in zip(t.buffers, _modes(t)):
            if buffer in writes or (mode == "write" and buffer in reads):
                return False
    return True


class _Fuser:
    def __init__(self, graph, rt):
        self.trace, self.rt = graph.trace, rt
        self.users = {}  # serial -> the records binding that storage, in order
        for i, t in enumerate(self.trace):
            for s in t.serials:
                self.users.setdefault(s, []).append(i)
        self.normalize4 = batch_norm.kernel("normalize4")
        # sgd4_group's members at most, without and with momentum; None where sgd4 runs several vec4s a thread
        self.group_size = None
        if rt.variant["optim_vec4_per_thread"] == 1:
            self.group_size = (optim.group_size(rt, False), optim.group_size(rt, True))

    def _only_use(self, producer, slot):
        """The one record after `producer` that binds the storage in the producer's binding `slot`, where
        that storage is bound by those two alone and does not outlive the capture; else None."""
        t = self.trace[producer]
        users = self.users[t.serials[slot]]
        if len(users) != 2 or users[0] != producer or t.refs[slot]() is not None:
            return None
        return users[1]

    def _clear_between(self, start, end, chain, reads, writes):
        return clear_between(self.trace, start, end, chain, reads, writes)

    def chain(self, i):
        """(the chain's records, {its last record: the fused one}) from the normalize4 at record i, or None."""
        t = self.trace[i]
        if t.launch is None or t.launch.kernel is not self.normalize4:
            return None
        fields = batch_norm._PARAMS.unpack(t.launch.params)
        total = fields[8]
        chain, residual = [i], None
        value = (i, 1, fields[batch_norm._Y_OFF])  # the chain's value so far: (record, binding, offset)
        j = self._only_use(i, 1)
        add = None if j is None else _elementwise_op(self.trace[j], VEC4[BINARY], ("add",))
        if add is not None:
            _, n, (s_off, *offsets) = add
            mine = [slot for slot in (1, 2) if self.trace[j].serials[slot] == t.serials[1]]
            if n != total or len(mine) != 1 or offsets[mine[0] - 1] != value[2]:
                return None
            other = 3 - mine[0]
            residual = (self.trace[j].buffers[other], offsets[other - 1])
            chain.append(j)
            value = (j, 0, s_off)
            j = self._only_use(j, 0)
        relu = None if j is None else _elementwise_op(self.trace[j], VEC4[UNARY], ("relu",))
        if relu is not None:
            _, n, (z_off, in_off) = relu
            producer, slot, offset = value
            if n == total and in_off == offset and self.trace[j].serials[1] == self.trace[producer].serials[slot]:
                chain.append(j)
                value = (j, 0, z_off)
            else:
                relu = None
        if len(chain) == 1:
            return None
        end = chain[-1]
        b = t.buffers  # normalize4's: x, y, weight, bias, rm, rv, count, save
        if not self._clear_between(i, end, chain, reads={b[0], b[2], b[3], b[6], b[7]}, writes={b[6], b[7]}):
            return None
        if residual is not None and not self._clear_between(chain[1], end, chain, reads={residual[0]}, writes=()):
            return None
        out = self.trace[value[0]].buffers[value[1]]
        if out in (b[0], b[2], b[3], b[6], b[7]):
            return None
        # The output may have taken the residual's buffer once the residual was read (the pool reuses a
        # freed storage's buffer): then the residual is read from the output's own binding, if in place
        in_out = residual is not None and residual[0] is out
        if in_out and residual[1] != value[2]:
            return None
        launch = batch_norm.fused_normalize(self.rt, t.launch, value[2], None if residual is None else residual[1],
                                            relu is not None, in_out)
        if launch is None:
            return None
        r_buffer = residual[0] if residual is not None and not in_out else self.rt.dummy.buffer
        return chain, {end: self.rt.dispatch_record(launch, (b[0], out, b[2], b[3], b[6], b[7], r_buffer))}

    def grad_chain(self, j):
        """(the pair's records, {the backward's record: the fused one}) from a gradient accumulation's add at record
        j whose sum only an op's backward reads (ReLU's, at each ResNet block's input: the two branches' input
        gradients, then the ReLU before them), as one add_unary_backward4; or None."""
        add = _elementwise_op(self.trace[j], VEC4[BINARY], ("add",))
        k = None if add is None else self._only_use(j, 0)
        if k is None:
            return None
        t, u = self.trace[j], self.trace[k]
        n, (s_off, *summands) = add[1], add[2]
        backward = _elementwise_op(u, VEC4[UNARY_BACKWARD], elementwise.ops().backward)
        if backward is None or backward[1] != n or backward[2][1] != s_off or u.serials[1] != t.serials[0]:
            return None
        launch = u.launch
        c = dict(launch.constants)
        fields = list(elementwise._PARAMS.unpack(launch.params))
        operands = [(t.buffers[1], summands[0]), (t.buffers[2], summands[1])]
        out = u.buffers[0]
        # A summand's storage freed after the add may have lent its buffer to the backward's output: that one
        # is read through the output's binding (as IN0_FROM_OUT), where it sits where each result goes.
        in_out = [i for i, (buffer, _) in enumerate(operands) if buffer is out]
        if len(in_out) > 1 or in_out and operands[in_out[0]][1] != fields[8]:
            return None
        if in_out:
            operands.insert(0, operands.pop(in_out[0]))
        if not self._clear_between(j, k, (j, k), reads={buffer for buffer, _ in operands}, writes=()):
            return None
        c["IN0_FROM_OUT"] = bool(in_out)
        fields[9], fields[20] = operands[0][1], operands[1][1]
        fused = elementwise.ADD_UNARY_BACKWARD4
        launch = self.rt.launch(fused, fused.constants(c), elementwise._PARAMS.pack(*fields), launch.groups,
                                launch.slots)
        first = self.rt.dummy.buffer if in_out else operands[0][0]
        return [j, k], {k: self.rt.dispatch_record(launch, (out, first, *u.buffers[2:], operands[1][0]))}

    def masked_output(self, k):
        """(the records, {chunk record: its fused record}) from a ReLU backward at record k whose gradient the
        output transforms of a Winograd input gradient alone wrote (chunk by chunk), and read by nothing else:
        each chunk writes its values where the ReLU's output is > 0, else 0, into the backward's output (at each
        ResNet block's inner ReLU: conv2's input gradient), the backward's pass gone; or None."""
        u = self.trace[k]
        relu = _elementwise_op(u, VEC4[UNARY_BACKWARD], ("relu",))
        if relu is None:
            return None
        _, n, (o_off, g_off, y_off, _) = relu
        users = self.users[u.serials[1]]
        if users[-1] != k or u.refs[1]() is not None or users.count(k) != 1:
            return None
        chunks, regions = users[:-1], []
        for i in chunks:
            t = self.trace[i]
            if (t.launch is None or t.launch.kernel.entry != "wino_output"
                    or t.serials.count(u.serials[1]) != 1 or t.serials[2] != u.serials[1]):
                return None
            regions.append((*winograd.output_region(t.launch), i))
        regions.sort()
        end = g_off
        for first, count, _ in regions:  # the chunks tile the gradient exactly
            if first != end:
                return None
            end += count
        if not chunks or end != g_off + n:
            return None
        out, y = u.buffers[0], u.buffers[2]
        writes = [(i, o_off + first - g_off, o_off + first - g_off + count) for first, count, i in regions]
        if not self._clear_for_chunks(chunks[0], k, set(chunks), y, out, writes):
            return None
        fused = {}
        for i, lo, _ in writes:
            t = self.trace[i]
            launch = winograd.masked_output(self.rt, t.launch, lo, y_off + lo - o_off)
            if launch is None:
                return None
            fused[i] = self.rt.dispatch_record(launch, (t.buffers[0], t.buffers[1], out, y))
        return chunks + [k], fused

    def linear_activation(self, i):
        """(the pair's records, {its place: the fused record}) of a matmul.wgsl product (or split-K reduction) at
        record i whose output the next record to read it passes through GELU, as one product whose epilogue also
        writes the GELU's output (see the module doc); or None.

        The backward of GELU needs the pre-activation y, so the product still writes it beside gelu(y). The other
        way, writing gelu(y) alone and having the backward run the product again with GELU's derivative in its
        epilogue, would move fewer bytes (a GPT's c_fc: y is [rows, 4C], the recomputation reads x [rows, C] and
        the weight), but it is a whole product more per layer: 2 * rows * 4C * C flops to save 2 * rows * 4C
        words of traffic, about C / 2 flops a byte, where an H200 does ~10 flops in the time of a byte. Writing
        y costs what the unfused step already paid, less the GELU pass's read of it."""
        t = self.trace[i]
        launch = t.launch
        if launch is None or launch.params is None or dict(launch.constants).get("RELU"):
            return None
        if matmul.activated(launch.kernel, matmul.ACTIVATIONS[0]) is None:
            return None
        f = matmul_plan._PARAMS.unpack(launch.params)
        M, N, o_off, splits, batch = f[0], f[1], f[6], f[14], f[15]
        if splits > 1 and not launch.kernel.entry.startswith("matmul_reduce"):
            return None  # a split product writes partial tiles: its reduction writes the output
        users = self.users[t.serials[2]]
        if users[0] != i or len(users) < 2:
            return None
        j = users[1]
        u = self.trace[j]
        act = _activation_op(u, matmul.ACTIVATIONS)
        if act is None or u.serials[1] != t.serials[2] or u.serials.count(t.serials[2]) != 1:
            return None
        name, n, (z_off, in_off) = act
        out = u.buffers[0]
        if n != batch * M * N or in_off != o_off or z_off != o_off or out in t.buffers:
            return None
        # At the product's place, when nothing between touches the GELU's output; else at the GELU's place, when
        # nothing between writes what the product reads or touches its output.
        if self._clear_between(i, j, (i, j), reads=(), writes={out}):
            place = i
        elif self._clear_between(i, j, (i, j), reads={t.buffers[0], t.buffers[1], t.buffers[3]},
                                 writes={t.buffers[2]}):
            place = j
        else:
            return None
        twin = matmul.activated(launch.kernel, name)
        fused = self.rt.launch(twin, launch.constants, launch.params, launch.groups, launch.slots)
        return [i, j], {place: self.rt.dispatch_record(fused, (*t.buffers, out))}

    def sgd_group(self, i):
        """(the records, {the last: the fused one}) of the run of sgd4 records of one group_key from record i,
        each with its own buffers, as one sgd4_group dispatch; or None (a run of one, or sgd4 running several
        vec4s a thread)."""
        first = self.trace[i]
        key = optim.group_key(first.launch)
        if self.group_size is None or key is None:
            return None
        momentum = bool(dict(key[0])["MOMENTUM"])
        per = optim.member_bindings(momentum)
        run, seen = [], set()
        for k in range(i, min(i + self.group_size[momentum], len(self.trace))):
            t = self.trace[k]
            if optim.group_key(t.launch) != key or t.buffers[6] is not first.buffers[6]:  # (the skip flag's)
                break
            own = t.buffers[:per]
            if seen.intersection(own) or len(set(own)) != per:  # (WebGPU: no buffer bound writable twice)
                break
            seen.update(own)
            run.append(k)
        launch = optim.group_launch(self.rt, [self.trace[k].launch for k in run]) if len(run) > 1 else None
        if launch is None:
            return None
        buffers = [b for k in run for b in self.trace[k].buffers[:per]] + list(first.buffers[5:7])
        return run, {run[-1]: self.rt.dispatch_record(launch, tuple(buffers))}

    def _clear_for_chunks(self, start, end, chunks, y, out, writes):
        """Whether the chunks between start and end may write their masked values early, each at its own place:
        the records between them leave y unwritten, and touch `out` only as the input gradient's own input
        transforms reading dY, each before any chunk writes where it reads (the backward's output may have taken
        dY's buffer once the convolution's backward let it go: chunk by chunk, a chunk's images of dY are read
        before its images of the gradient are written, which is where the same images sit)."""
        for p in range(start + 1, end):
            if p in chunks:
                continue
            t = self.trace[p]
            for buffer, mode in zip(t.buffers, _modes(t)):
                if buffer is y and mode == "write":
                    return False
                if buffer is not out:
                    continue
                if mode == "write" or t.launch is None or t.launch.kernel.entry != "wino_input":
                    return False
                lo, count = winograd.input_region(t.launch)
                if any(q < p and lo < hi and w_lo < lo + count for q, w_lo, hi in writes):
                    return False
        return True


def _dead(fuser):
    """The dispatches whose results nothing reads (see the module doc), found from the last record back."""
    errors = fuser.rt.errors.buffer
    used, dead = set(), set()
    for i in range(len(fuser.trace) - 1, -1, -1):
        t = fuser.trace[i]
        if t.launch is not None and errors not in t.buffers:
            writes = [k for k, mode in enumerate(_modes(t)) if mode == "write"]
            if writes and all(t.serials[k] not in used and t.refs[k]() is None for k in writes):
                dead.add(i)
                continue
        used.update(t.serials)
    return dead


class _Attention:
    """Hand-written attention's softmax_masked records with the scale and dropout around them (module doc)."""

    NO_SLOT = 0xFFFFFFFF

    def __init__(self, fuser, dead):
        self.f, self.trace, self.rt, self.dead = fuser, fuser.trace, fuser.rt, dead
        self.users = {s: [i for i in users if i not in dead] for s, users in fuser.users.items()}

    def _clear(self, start, end, chain, reads, writes):
        """_Fuser._clear_between, the dead records (which no longer run) aside."""
        return self.f._clear_between(start, end, set(chain) | self.dead, reads, writes)

    def _affine(self, k):
        """(a, n, out offset, input offset) of a float32 vec4 record x * a (the scale: inline, no shift), or None."""
        t = self.trace[k]
        op = _elementwise_op(t, VEC4[UNARY], ("affine",))
        if op is None:
            return None
        f = elementwise._PARAMS.unpack(t.launch.params)
        if f[2] != self.NO_SLOT or f[3] != self.NO_SLOT or f[5] != 0.0:
            return None
        return f[4], op[1], op[2][0], op[2][1]

    def _dropout(self, k):
        """dropout.wgsl's Params of record k (n, x_off, out_off, seed, offset, seed_slot, offset_slot, p, scale)."""
        t = self.trace[k]
        if t.launch is None or t.launch.kernel not in (dropout.DROPOUT, dropout.DROPOUT4):
            return None
        return dropout._PARAMS.unpack(t.launch.params)

    @staticmethod
    def _dropout_changes(d):
        return dict(seed=d[3], offset=d[4], seed_slot=d[5], offset_slot=d[6], p_drop=d[7], drop_scale=d[8])

    def forward(self, i):
        """(records, {place: fused record}) of a softmax_masked forward at record i with its scale and dropout."""
        t = self.trace[i]
        if not softmax_masked.is_forward(t.launch):
            return None
        f = softmax_masked.fields(t.launch)
        n = f["rows"] * f["cols"]
        scale = drop = None
        users = self.users[t.serials[1]]
        if len(users) == 2 and users[1] == i and t.refs[1]() is None:  # x = x' * a, read by this record alone
            a = users[0]
            aff = self._affine(a)
            if (aff is not None and self.trace[a].serials[0] == t.serials[1] and aff[1] == n and aff[2] == f["x_off"]
                    and self._clear(a, i, (a, i), reads={self.trace[a].buffers[1]}, writes=())):
                scale = (a, dict(x_off=aff[3], scale=f["scale"] * aff[0]), self.trace[a].buffers[1])
        later = [k for k in self.users[t.serials[0]] if k > i]
        d = self._dropout(later[0]) if later else None
        if d is not None and self.trace[later[0]].serials[1] == t.serials[0] and d[0] == n and d[1] == f["y_off"]:
            drop = (later[0], dict(drop_off=d[2], **self._dropout_changes(d)))
        for use_scale, use_drop in ((True, True), (False, True), (True, False)):
            s, e = scale if use_scale else None, drop if use_drop else None
            if s is None and e is None:
                continue
            chain, changes, buffers, slots, place = [i], {}, list(t.buffers), (), i  # y, x, mask, dropped, ...
            if s is not None:
                chain.insert(0, s[0])
                changes.update(s[1])
                buffers[1] = s[2]
            if e is not None:
                k = e[0]
                if not self._clear(i, k, set(chain) | {k}, reads={buffers[1], t.buffers[2]},
                                   writes={t.buffers[0], self.trace[k].buffers[0]}):
                    continue
                changes.update(e[1])
                buffers[3], slots, place = self.trace[k].buffers[0], self.trace[k].launch.slots, k
                chain.append(k)
            found = self._fused(t, chain, changes, buffers, slots, place, outputs=(0, 3), inputs=(1, 2),
                                offsets=("y_off", "x_off"))
            if found is not None:
                return found
        return None

    def _fused(self, t, chain, changes, buffers, slots, place, outputs, inputs, offsets):
        """The chain's fused record at `place`, or None. The pool may have given the result (output 0) the buffer of
        the input it reads (input 1: x forward, the gradient backward), freed meanwhile: at the same offset the
        kernel reads it through the result's binding (IN_FROM_OUT); any other buffer bound both written and read,
        which WebGPU refuses, leaves the chain as it is. offsets: the Params fields of output 0's and input 1's."""
        f = dict(softmax_masked.fields(t.launch), **changes)
        in_from_out = buffers[1] is buffers[0] and f[offsets[0]] == f[offsets[1]]
        shared = {buffers[k] for k in outputs} & {buffers[k] for k in inputs if not (k == 1 and in_from_out)}
        if shared or len({buffers[k] for k in outputs}) != len(outputs):
            return None
        if in_from_out:
            buffers = list(buffers)
            buffers[1] = self.rt.dummy.buffer
        launch = softmax_masked.relaunch(self.rt, t.launch, slots, in_from_out, **changes)
        if launch is None:
            return None
        return chain, {place: self.rt.dispatch_record(launch, tuple(buffers))}

    def backward(self, i):
        """(records, {place: fused record}) of a softmax_masked backward at record i with the dropout's backward
        before it and the scale's after it."""
        t = self.trace[i]
        if not softmax_masked.is_backward(t.launch):
            return None
        f = softmax_masked.fields(t.launch)
        n = f["rows"] * f["cols"]
        drop = scale = None
        users = self.users[t.serials[1]]
        if len(users) == 2 and users[1] == i and t.refs[1]() is None:  # grad = dropout(grad'), read here alone
            e = users[0]
            d = self._dropout(e)
            if (d is not None and self.trace[e].serials[0] == t.serials[1] and d[0] == n and d[2] == f["g_off"]
                    and self._clear(e, i, (e, i), reads={self.trace[e].buffers[1]}, writes=())):
                drop = (e, dict(g_off=d[1], **self._dropout_changes(d)))
        users = self.users[t.serials[0]]
        if len(users) == 2 and users[0] == i and t.refs[0]() is None:  # grad_x read by grad_x * a alone
            a = users[1]
            aff = self._affine(a)
            if aff is not None and self.trace[a].serials[1] == t.serials[0] and aff[1] == n and aff[3] == f["x_off"]:
                scale = (a, dict(x_off=aff[2], scale=f["scale"] * aff[0]))
        for use_drop, use_scale in ((True, True), (True, False), (False, True)):
            e, s = drop if use_drop else None, scale if use_scale else None
            if s is None and e is None:
                continue
            chain, changes, buffers, slots, place = [i], {}, list(t.buffers), (), i  # grad_x, grad, mask, -, y
            if e is not None:
                chain.insert(0, e[0])
                changes.update(e[1])
                buffers[1], slots = self.trace[e[0]].buffers[1], self.trace[e[0]].launch.slots
            if s is not None:
                a = s[0]
                if not self._clear(i, a, set(chain) | {a}, reads={buffers[1], t.buffers[2], t.buffers[4]},
                                   writes={self.trace[a].buffers[0]}):
                    continue
                changes.update(s[1])
                buffers[0], place = self.trace[a].buffers[0], a
                chain.append(a)
            found = self._fused(t, chain, changes, buffers, slots, place, outputs=(0,), inputs=(1, 2, 4),
                                offsets=("x_off", "g_off"))
            if found is not None:
                return found
        return None


def fuse(graph, rt):
    """graph.records with autocast's casts back to float32 folded into products (cast_folding.py), each fusable
    chain (see the module docstring) replaced by its one dispatch and the dead dispatches dropped; sets graph.fused
    to the number of casts folded and chains fused, graph.grouped to the number of sgd4 updates grouped and
    graph.dead to the number of dispatches dropped."""
    records, dropped, claimed, fused, grouped = list(graph.records), set(), set(), 0, 0
    if rt.has_f16:
        folded = fold_casts(graph.trace, records, rt, functools.partial(clear_between, graph.trace))
        dropped.update(folded)
        claimed.update(folded)
        fused += len(folded)
    fuser = _Fuser(graph, rt)
    dead = _dead(fuser)
    dropped.update(dead)
    claimed.update(dead)
    attention = _Attention(fuser, dead)
    for i in range(len(records)):
        if i in claimed:
            continue
        found = attention.forward(i) or attention.backward(i)
        if found is None or claimed.intersection(found[0]):
            continue
        chain, replaced = found
        for k, record in replaced.items():
            records[k] = record
        dropped.update(k for k in chain if k not in replaced)
        claimed.update(chain)
        fused += 1
    for i in range(len(records)):
        if i in claimed:
            continue
        found = fuser.chain(i) or fuser.grad_chain(i) or fuser.masked_output(i) or fuser.linear_activation(i)
        group = None if found is not None else fuser.sgd_group(i)
        found = found or group
        # (a residual add reads two batch norms' outputs, ResNet's two branches: the first chain takes it)
        if found is None or claimed.intersection(found[0]):
            continue
        chain, replaced = found
        for k, record in replaced.items():
            records[k] = record
        dropped.update(k for k in chain if k not in replaced)
        claimed.update(chain)
        if group is None:
            fused += 1
        else:
            grouped += len(chain)
    graph.fused, graph.grouped, graph.dead = fused, grouped, len(dead)
    return [r for k, r in enumerate(records) if k not in dropped]
