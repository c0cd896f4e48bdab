"""The autograd engine: the graph recorded as ops run, grad modes, and backward().

Internal: the engine imports nothing of the Tensor, so everything can import it. The public namespace
``webgrad.autograd`` (autograd.py) re-exports it with ``Function``.


Each differentiable op, right where it computes its result, calls :func:`record` with its inputs and a
closure that maps the output's gradient to one gradient per input (see ``webgrad/ops``). Closures use
ordinary tensor ops, so every backward runs on whatever device the forward ran on.
"""

import sys
import threading
import weakref

from ._anomaly import check_anomaly, forward_trace, is_anomaly_enabled
from ._view import View

_state = threading.local()


def is_grad_enabled():
    return getattr(_state, "enabled", True)


class _GradMode:
    """Switch gradient recording to `mode` inside a `with` block or a decorated function."""

    mode = True

    def __enter__(self):
        self.prev = is_grad_enabled()
        _state.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _state.enabled = self.prev

    def __call__(self, fn):
        mode = self.mode

        def wrapper(*args, **kwargs):
            prev = is_grad_enabled()
            _state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                _state.enabled = prev

        wrapper.__name__ = getattr(fn, "__name__", "wrapper")
        wrapper.__doc__ = getattr(fn, "__doc__", None)
        return wrapper


class _BareDecorator(_GradMode):
    """A mode that also decorates without parentheses (``@torch.no_grad``), as torch's since 2.0."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_BareDecorator):
    mode = False


class enable_grad(_BareDecorator):
    mode = True


class set_grad_enabled(_GradMode):
    """Like torch.set_grad_enabled: takes effect at once when called, and restores the previous mode at
    the end of a `with` block."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = is_grad_enabled()
        _state.enabled = self.mode

    def __enter__(self):
        return self  # already switched by __init__; __exit__ restores the mode from before the call

    def __call__(self, fn):
        _state.enabled = self.prev  # used as a decorator: undo the switch made by __init__
        return super().__call__(fn)


# The recorder of an active webgrad.profiler.profile (it times each node's backward), else None.
PROFILER = None

# ----------------------------------------------------------------------------- in-place writes
# PyTorch's version counters, kept per storage (the views of one storage share it, as in PyTorch): every
# in-place write into a storage counts (Tensor._version) and is stamped with the write clock. A node remembers
# the clock when it was recorded; its backward checks the tensors its closure saved only if the clock moved
# since (a loop without in-place writes in its forward pays nothing), and raises PyTorch's error when one was
# written after the node saved it: a backward must never compute with values its forward did not see.
_clock = [0]
_writes = {}  # id(storage) -> [writes, clock of the last, weak reference to the storage]
# Storages written in place through a tensor with history (x.relu_() on a conv's output): another tensor that
# shares the storage (a view, or the base of a view) and was computed before the write is stale.
_graph_writes = {}  # id(storage) -> clock of the last such write


def note_write(storage, graph=False):
    """Count an in-place write into `storage` (graph: through a tensor with autograd history)."""
    _clock[0] += 1
    key = id(storage)
    entry = _writes.get(key)
    if entry is None or entry[2]() is not storage:
        entry = _writes[key] = [0, 0, weakref.ref(storage, lambda _, key=key: _forget(key))]
    entry[0] += 1
    entry[1] = _clock[0]
    if graph:
        _graph_writes[key] = _clock[0]


def _forget(key):
    _writes.pop(key, None)
    _graph_writes.pop(key, None)


def version(storage):
    """The number of in-place writes into `storage` so far (Tensor._version)."""
    entry = _writes.get(id(storage))
    return entry[0] if entry is not None and entry[2]() is storage else 0


def _last_write(storage):
    entry = _writes.get(id(storage))
    return entry[1] if entry is not None and entry[2]() is storage else 0


def clock():
    return _clock[0]


class Node:
    """One recorded op: the tensors it read and how to send a gradient back to them.

    `backward_fn(grad)` returns one gradient (or None) per entry of `inputs`. After a backward pass
    without retain_graph the closure is dropped, freeing the tensors it saved. `trace`: where the op was
    called, kept only in anomaly mode. `inputs` holds leaves themselves (their .grad is filled) and, for
    the others, an :class:`Edge`: as in PyTorch, the graph holds only what backward closures saved.
    `clock`: the write clock when the node was recorded (see note_write). `saved`: see _pack_closure.
    `hooks`: the gradient hooks of the tensor it made (kept by the node, as PyTorch keeps them with the grad_fn:
    a hook registered on an intermediate result fires even after the script dropped its last name for that
    tensor).
    """

    __slots__ = ("_name", "inputs", "backward_fn", "trace", "clock", "hooks", "saved", "post_hooks", "__weakref__")

    def __init__(self, name, inputs, backward_fn):
        self._name = name
        self.inputs = inputs
        self.backward_fn = backward_fn
        self.trace = forward_trace()
        self.clock = _clock[0]
        self.hooks = None  # {handle id: hook} of the tensor this node made (Tensor.register_hook), or None
        self.saved = None  # under saved tensors hooks: the packed tensors its closure reads (see _pack_closure)
        self.post_hooks = None  # {handle id: hook(grad_inputs, grad_outputs)} (register_hook), or None

    def __repr__(self):
        return f"<{self.name_()} object at {hex(id(self))}>"  # as torch prints a grad_fn

    # PyTorch-compatible introspection (torch's names end in the overload's number: MulBackward0)
    def name_(self):
        return torch_node_name(self._name)

    @property
    def name(self):
        """The op's name ("Mul"), which called as PyTorch's grad_fn.name() gives torch's ("MulBackward0")."""
        return NodeName(self._name)

    @name.setter
    def name(self, value):
        self._name = str(value)
        self.__class__ = node_class(self._name)

    def __getattr__(self, attr):
        """PyTorch's debugging view of what a node saved: _saved_self and _saved_other (the tensors of its first two
        inputs), _saved_result (its output), through unpack_hook where saved tensors hooks packed them."""
        if not attr.startswith("_saved_") or attr.startswith("_saved__"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")
        return _saved_by_role(self, attr[len("_saved_"):])

    def register_prehook(self, hook):
        """hook(grad_outputs) -> new grad_outputs or None, before the node's backward (PyTorch's Node API)."""
        def on_gradient(g):
            new = hook((g,))
            if new is None:
                return None
            if len(new) != 1:
                raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has returned an incorrect number of "
                                   f"values (got {len(new)}, but expected 1)")
            return new[0]
        return add_node_hook(self, on_gradient)

    def register_hook(self, hook):
        """hook(grad_inputs, grad_outputs) -> new grad_inputs or None, after the node's backward: one gradient per
        input (next_functions), None for an input that takes none (PyTorch's Node API)."""
        if self.post_hooks is None:
            self.post_hooks = {}
        handle = RemovableHandle(self.post_hooks)
        self.post_hooks[handle.id] = hook
        return handle

    @property
    def next_functions(self):
        """(node, 0) per input, as PyTorch's: the node that made it, an AccumulateGrad for a leaf that requires
        grad, None for an input that takes no gradient."""
        return tuple((None if t is None else AccumulateGrad(t) if not isinstance(t, Edge) else t.grad_fn, 0)
                     for t in self.inputs)


class NodeName(str):
    """A node's op name ("Mul"), as webgrad code compares it, that called as PyTorch's grad_fn.name() gives torch's
    name for the node ("MulBackward0"; "SumBackward1" for the node of a sum over dims, whose op name is "Sum")."""

    def __new__(cls, full):
        name = str.__new__(cls, full.partition(".")[0])
        name._full = full
        return name

    def __call__(self):
        return torch_node_name(self._full)


def torch_node_name(name):
    """PyTorch's name of the node of op `name`: "Mul" -> "MulBackward0"; an overload's number after a dot, as
    torch numbers the overloads of one op ("Sum.1", a sum over dims -> "SumBackward1"); nothing after the dot for a
    custom Function ("Exp." -> "ExpBackward")."""
    base, dot, overload = name.partition(".")
    return f"{base}Backward{overload if dot else 0}"


_NODE_CLASSES = {}


def node_class(name):
    """The Node subclass named as PyTorch's node class (type(y.grad_fn).__name__ == "MulBackward0"), one per
    name."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(torch_node_name(name), (Node,), {"__slots__": ()})
    return cls


def renamed(out, name, source=None):
    """`out`, its node named `name` as PyTorch names the op's node where the op is composed of others here (t is
    a transpose, a stack a cat of unsqueezed views): only a node of out's own, not `source`'s (an op that gave its
    input back)."""
    node = getattr(out, "grad_fn", None)
    if node is not None and node is not getattr(source, "grad_fn", None):
        node.name = name
    return out


class AccumulateGrad:
    """What next_functions names for a leaf, as PyTorch's node that fills the leaf's .grad (``variable``)."""

    __slots__ = ("variable",)
    next_functions = ()

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


class Edge:
    """A non-leaf input as a Node keeps it: the node that made it (the graph), its shape and dtype (to check
    and cast the gradient sent to it) and a weak reference to the tensor (whose .grad is filled if it
    retains grad). Holding the tensor itself would keep its GPU buffer from the forward until this node's
    backward (and, through a returned loss, past it), even where no backward closure needs its values."""

    __slots__ = ("grad_fn", "shape", "dtype", "_tensor")

    def __init__(self, tensor):
        self.grad_fn = tensor.grad_fn
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype  # the engine casts the gradient to it (autocast)
        self._tensor = weakref.ref(tensor)

    def tensor(self):
        """The tensor, or None once no one else holds it (then no one can read its .grad either)."""
        return self._tensor()


class SliceGrad:
    """A gradient that is zero but for pieces along one dim: what the backward of a narrowing view sends (the
    pieces of a split or a chunk, ``x[..., a:b]``). The engine adds two of them by joining their pieces and makes
    the tensor only when a node or a leaf takes it (:meth:`dense`), so the pieces of a split meet in one buffer,
    each written once as a cat writes them, instead of an input-sized tensor of zeros per piece and the
    additions of them all (a GPT's q, k, v split: three fills, three copies and two additions of the whole
    [B, T, 3C] gradient per layer). ``make(shape, dtype, device, dim, pieces)`` builds the tensor
    (ops/shape.py sets it)."""

    __slots__ = ("shape", "dtype", "device", "dim", "pieces")
    make = None

    def __init__(self, shape, dtype, device, dim, pieces):
        self.shape, self.dtype, self.device, self.dim = shape, dtype, device, dim
        self.pieces = pieces  # [(start along dim, the piece's gradient)]

    def join(self, other):
        """The sum of two such gradients as one, or None where they do not join (another dim, dtype, device)."""
        if (type(other) is not SliceGrad or other.shape != self.shape or other.dim != self.dim
                or other.dtype is not self.dtype or other.device != self.device):
            return None
        return SliceGrad(self.shape, self.dtype, self.device, self.dim, self.pieces + other.pieces)

    def dense(self):
        return SliceGrad.make(self.shape, self.dtype, self.device, self.dim, self.pieces)


def _dense(g):
    return g.dense() if type(g) is SliceGrad else g


def _add_grads(a, b):
    joined = a.join(b) if type(a) is SliceGrad else None
    return joined if joined is not None else _sum_grads(_dense(a), _dense(b))


def _sum_grads(a, b):
    """a + b for two gradients of one tensor. A sparse gradient (nn.Embedding(sparse=True)) plus a sparse one stays
    sparse (their entries concatenated), plus a dense one is dense, in either order, as PyTorch's AccumulateGrad
    (the sparse + dense operator itself is refused, so the dense side goes first)."""
    return b + a if a.is_sparse and not b.is_sparse else a + b


def record(out, name, inputs, backward_fn):
    """Attach `out` to the graph if grad is enabled and any input requires grad. Returns `out`.

    `inputs` may hold non-tensors or None for arguments that take no gradient; those get None.
    """
    if not is_grad_enabled():
        return out
    # Every differentiable op calls this: one plain loop (no generator), and nothing built when no input
    # requires grad (the optimizer's and the no-grad paths).
    tracked, any_tracked = [], False
    for t in inputs:
        if getattr(t, "requires_grad", False):
            if t.grad_fn is None:
                tracked.append(t)
            else:
                if _graph_writes:
                    _check_fresh(t, name)
                tracked.append(Edge(t))
            any_tracked = True
        else:
            tracked.append(None)
    if not any_tracked:
        return out
    tracked = tuple(tracked)
    outs = out if isinstance(out, tuple) else (out,)
    node = node_class(name)(name, tracked, backward_fn)
    if SAVED_HOOKS:
        _pack_closure(node)
    for o in outs:
        if o.dtype.is_floating:
            o.requires_grad = True
            o.grad_fn = node
    return out


def record_adjoint(result, g, forward, name):
    """`result` = A^T g, the backward of a linear op A (forward: h -> A h, with the op's fixed arguments: a
    pooling's windows, a dropout's mask, an index). Under create_graph (grad mode on, g requiring grad) it is
    recorded with A itself as its backward, the adjoint of the adjoint, so it can be differentiated again;
    A's derivative in its input is zero (or the op's own, for a max pooling's fixed argmax)."""
    if g.requires_grad and is_grad_enabled():
        record(result, name, (g,), lambda h: (forward(h),))
    return result


# ----------------------------------------------------------------------------- saved tensors hooks
# The (pack_hook, unpack_hook) pairs of the active autograd.graph.saved_tensors_hooks blocks, innermost last, and
# the messages of the active disable_saved_tensors_hooks blocks. record() only checks whether SAVED_HOOKS is empty:
# without hooks, saving costs nothing.
SAVED_HOOKS = []
HOOKS_DISABLED = []
# Nodes recorded under hooks whose closures still hold the tensors they saved (see _pack_closure)
_unreleased = []


def saved_hooks_active():
    return bool(SAVED_HOOKS)


def push_saved_hooks(pack_hook, unpack_hook):
    if HOOKS_DISABLED:
        raise RuntimeError(HOOKS_DISABLED[-1])
    SAVED_HOOKS.append((pack_hook, unpack_hook))


def pop_saved_hooks():
    SAVED_HOOKS.pop()
    if not SAVED_HOOKS:
        release_saved()


def pack_saved(t):
    """(unpack_hook, pack_hook(t)) with the innermost hooks, as PyTorch saves a tensor for backward under them."""
    pack, unpack = SAVED_HOOKS[-1]
    storage = t._view.storage
    before = version(storage)
    packed = pack(t)
    if version(storage) != before:
        raise RuntimeError("A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
                           "pack hook cannot be modified by in-place operations as this can lead to unexpected "
                           "side-effects. Please open an issue if you need to perform in-place operations on the "
                           "input to a pack hook.")
    return unpack, packed


def unpack_saved(pair):
    unpack, packed = pair
    t = unpack(packed)
    if not isinstance(t, _TENSOR[0]):
        raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                        f"{type(t).__name__}")
    return t


def _closure_slots(fn, slots, seen, depth=0):
    """Where a backward closure keeps the tensors it reads: (cell, None) for a cell holding a tensor, (cell, i)
    for item i of a tuple or list a cell holds, following the functions it captures (as _saved_tensors)."""
    if depth > 6 or id(fn) in seen:
        return
    seen.add(id(fn))
    tensor_type = _TENSOR[0]
    for cell in getattr(fn, "__closure__", None) or ():
        if not _cell_filled(cell):
            continue
        v = cell.cell_contents
        if isinstance(v, tensor_type):
            slots.append((cell, None))
        elif isinstance(v, (tuple, list)) and len(v) <= 64:
            slots.extend((cell, i) for i, item in enumerate(v) if isinstance(item, tensor_type))
        elif callable(v) and hasattr(v, "__code__"):
            _closure_slots(v, slots, seen, depth + 1)


def _pack_closure(node):
    """Save `node`'s tensors through the innermost saved tensors hooks: pack_hook gets each tensor its backward
    closure reads, and the closure gives up the tensors themselves once the ops recorded under the hooks have
    returned (release_saved, when the hooks' block ends: a closure's cells are its op's locals until then); its
    backward reads unpack_hook's tensors instead (_unpack_closure). A tensor is packed once however many cells hold
    it, but once per argument it was given as (x * x: twice), as PyTorch saves one value per argument."""
    slots = []
    _closure_slots(node.backward_fn, slots, set())
    composite = getattr(node.backward_fn, "composite", None)
    if composite is not None:
        _closure_slots(composite, slots, set())
    if not slots:
        return
    slots = list({(id(cell), i): (cell, i) for cell, i in slots}.values())  # a cell two closures share: once
    groups = {}
    for cell, i in slots:
        groups.setdefault(id(cell.cell_contents if i is None else cell.cell_contents[i]), []).append((cell, i))
    placed, pairs, roles = [], [], {}
    for group in groups.values():
        first = group[0][0].cell_contents if group[0][1] is None else group[0][0].cell_contents[group[0][1]]
        times = max(1, min(len(group), sum(1 for t in node.inputs if t is first)))
        start = len(pairs)
        pairs.extend(pack_saved(first) for _ in range(times))
        placed.extend((cell, i, start + min(j, times - 1)) for j, (cell, i) in enumerate(group))
        for k, role in enumerate(_roles(node, first)[:times]):
            roles.setdefault(role, start + min(k, times - 1))
    node.saved = (placed, pairs, roles)
    _unreleased.append(weakref.ref(node))


def _roles(node, t):
    """PyTorch's names for saved tensor `t` of `node` (self, other: its first two inputs; result: its output)."""
    roles = ["result"] if t.grad_fn is node else []
    for role, edge in zip(("self", "other"), node.inputs):
        if edge is not None and (edge if edge.grad_fn is None else edge.tensor()) is t:
            roles.append(role)
    return roles


def _saved_by_role(node, role):
    """grad_fn._saved_<role>: the saved tensor PyTorch names so (unpacked each time, under saved tensors hooks)."""
    if node.backward_fn is None:
        raise RuntimeError("Trying to backward through the graph a second time (or directly access saved tensors "
                           "after they have already been freed). Saved intermediate values of the graph are freed "
                           "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
                           "backward through the graph a second time or if you need to access saved tensors after "
                           "calling backward.")
    if node.saved is not None:
        k = node.saved[2].get(role)
        if k is not None:
            return unpack_saved(node.saved[1][k])
    else:
        found = []
        _saved_tensors(node.backward_fn, found, set())
        for t in found:
            if role in _roles(node, t):
                return t
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '_saved_{role}'")


def _set_slots(node, values):
    for cell, i, k in node.saved[0]:
        if i is None:
            cell.cell_contents = values[k]
        else:
            items = list(cell.cell_contents)
            items[i] = values[k]
            cell.cell_contents = type(cell.cell_contents)(items)


def _unpack_closure(node):
    _set_slots(node, [unpack_saved(pair) for pair in node.saved[1]])


def _release_closure(node, keep=False):
    """Drop the unpacked tensors after the backward ran (and the packed ones too, unless the graph is kept)."""
    _set_slots(node, [None] * len(node.saved[1]))
    if not keep:
        node.saved = None


def release_saved():
    """Empty the cells of the closures recorded under saved tensors hooks: from now on only what pack_hook
    returned keeps their tensors (save_on_cpu's device memory is freed here)."""
    nodes, _unreleased[:] = list(_unreleased), []
    for ref in nodes:
        node = ref()
        if node is not None and node.saved is not None and node.backward_fn is not None:
            _set_slots(node, [None] * len(node.saved[1]))


# ----------------------------------------------------------------------------- gradient hooks
class RemovableHandle:
    """What a register_*hook call returns (torch.utils.hooks.RemovableHandle): remove() takes the hook out of
    the dict it was put in; also a context manager that removes it on exit."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict = hooks_dict
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.extra_dicts = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())

    def remove(self):
        for d in [self.hooks_dict] + self.extra_dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# leaf tensors' hooks: id(tensor) -> [weak reference to it, {id: hook} run on its gradient before it is
# accumulated, {id: hook} run with the tensor after it was (register_post_accumulate_grad_hook)]
_leaf_hooks = {}


def _leaf_entry(t, create=False):
    entry = _leaf_hooks.get(id(t))
    if entry is not None and entry[0]() is not t:
        entry = None
    if entry is None and create:
        key = id(t)
        # (the dict bound as a default: at interpreter exit the module's globals may be gone before the tensor)
        forget = lambda _, key=key, hooks=_leaf_hooks: hooks.pop(key, None)  # noqa: E731
        entry = _leaf_hooks[key] = [weakref.ref(t, forget), {}, {}]
    return entry


def register_hook(t, hook):
    """Tensor.register_hook: hook(grad) runs on t's gradient each time one is computed for it (the sum of
    every contribution: once per backward pass) and may return a tensor that replaces it. On a leaf it runs
    before the gradient is accumulated into .grad; on a non-leaf before the gradient flows on to what t was
    computed from (and before retain_grad's copy, which PyTorch runs last whatever the order)."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not callable(hook):
        raise TypeError(f"register_hook expects a callable, got {type(hook).__name__}")
    if t.grad_fn is None:
        hooks = _leaf_entry(t, create=True)[1]
    else:
        if t.grad_fn.hooks is None:
            t.grad_fn.hooks = {}
        hooks = t.grad_fn.hooks
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def register_post_accumulate_grad_hook(t, hook):
    """Tensor.register_post_accumulate_grad_hook: hook(t) after a backward pass accumulated into leaf t's .grad."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    hooks = _leaf_entry(t, create=True)[2]
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def add_node_hook(node, hook):
    """A gradient hook on the tensor `node` made, by its node (nn.Module's backward hooks)."""
    if node.hooks is None:
        node.hooks = {}
    handle = RemovableHandle(node.hooks)
    node.hooks[handle.id] = hook
    return handle


def _run_hooks(hooks, g):
    for hook in list(hooks.values()):
        new = hook(g)
        if new is None:
            continue
        if tuple(getattr(new, "shape", ())) != tuple(g.shape) or not hasattr(new, "_view"):
            raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value: it returned "
                               f"{type(new).__name__} of shape {tuple(getattr(new, 'shape', ()))} for a gradient of "
                               f"shape {tuple(g.shape)}")
        g = new
    return g


def _run_post_hooks(node, input_grads, grad_out):
    """The gradients of `node`'s inputs through its register_hook hooks, as PyTorch's: each sees them (None for an
    input that takes no gradient) and the output's, and may return replacements."""
    grads = tuple(None if t is None or g is None else _dense(g)
                  for t, g in zip(node.inputs, list(input_grads) + [None] * (len(node.inputs) - len(input_grads))))
    for hook in list(node.post_hooks.values()):
        new = hook(grads, (grad_out,))
        if new is None:
            continue
        new = tuple(new)
        if len(new) != len(grads):
            raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has returned an incorrect number of values "
                               f"(got {len(new)}, but expected {len(grads)})")
        for old, g in zip(grads, new):
            if old is None and g is not None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
        grads = new
    return grads


def _check_fresh(t, name):
    """Refuse to use `t` when its storage was written in place through another tensor after t was computed
    (t is a view of the tensor modified in place, or its base): t's history does not hold that write."""
    written = _graph_writes.get(id(t._view.storage))
    if written is not None and written > t.grad_fn.clock and _last_write(t._view.storage) == written:
        raise RuntimeError(
            f"{name}: an input of shape {list(t.shape)} shares its memory with a tensor that was modified by an "
            "in-place operation after it was computed (a view of it, or the tensor it is a view of), so its "
            "gradient would miss that operation. webgrad does not rebase views after in-place operations: "
            "apply the in-place operation to a clone(), or use the out-of-place operation")


def _saved_tensors(fn, found, seen, depth=0):
    """The tensors a backward closure can read: those its function objects capture (cells and defaults),
    inside tuples, lists and dicts, following the functions it captures."""
    if depth > 6 or id(fn) in seen:
        return
    seen.add(id(fn))
    values = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _cell_filled(c)]
    values += list(getattr(fn, "__defaults__", None) or ())
    tensor_type = _TENSOR[0] if _TENSOR else None
    while values:
        v = values.pop()
        if tensor_type is not None and isinstance(v, tensor_type):
            found.append(v)
        elif callable(v) and hasattr(v, "__code__"):
            _saved_tensors(v, found, seen, depth + 1)
        elif isinstance(v, (tuple, list)) and len(v) <= 64:
            values.extend(v)
        elif isinstance(v, dict) and len(v) <= 64:
            values.extend(v.values())


def _cell_filled(cell):
    try:
        cell.cell_contents
    except ValueError:  # an empty cell (a name assigned later in the enclosing function)
        return False
    return True


def _check_saved(node):
    """Raise PyTorch's error if a tensor `node`'s backward saved was written in place after the node ran."""
    found = []
    _saved_tensors(node.backward_fn, found, set())
    for t in found:
        storage = t._view.storage
        if _last_write(storage) > node.clock:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{t.dtype} {list(t.shape)}] on {t.device}, saved by {node.name_()}, is at version "
                f"{version(storage)}; it was written after that op ran. Hint: compute with an out-of-place "
                "operation, or clone() the tensor before modifying it; webgrad.autograd.detect_anomaly() names "
                "the op that saved it.")


def _topological_order(roots):
    """Nodes reachable from the nodes `roots`, each before the nodes it depends on: the reverse of one
    depth-first post-order over all of them (iterative: deep graphs such as RNN unrolls must not hit
    Python's recursion limit)."""
    order, seen = [], set()
    stack = [(root, False) for root in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t.grad_fn is not None and id(t.grad_fn) not in seen:
                stack.append((t.grad_fn, False))
    order.reverse()
    return order


def backward(tensor, gradient, retain_graph=False, create_graph=False):
    """Accumulate d(tensor)/d(leaf) * gradient into every leaf's .grad. `gradient` is a tensor of
    tensor's shape (Tensor.backward checks the user's arguments and makes the seed)."""
    run_backward([(tensor, gradient)], retain_graph, create_graph)


def grad(roots, inputs, retain_graph=False, create_graph=False):
    """[d(roots)/d(input) for each of `inputs`] (None where an input is not reached), each root a (tensor,
    seed) pair; no .grad is touched (torch.autograd.grad). A complex64 tensor (webgrad/_complex.py) is in the
    graph as its float32 (real, imag) pairs, `_r`: its gradient is theirs, seen as complex."""
    roots = [(getattr(t, "_r", t), getattr(g, "_r", g)) for t, g in roots]
    pairs = [getattr(t, "_r", t) for t in inputs]
    captured = {id(t): None for t in pairs}
    run_backward(roots, retain_graph, create_graph, captured, targets={id(t): t for t in pairs})
    return [captured[id(p)] if p is t or captured[id(p)] is None else t._from_pairs(captured[id(p)])
            for p, t in zip(pairs, inputs)]


class BackwardPass:
    """One backward pass (backward() or autograd.grad) while it runs: `callbacks` run as it ends, in order."""

    __slots__ = ("callbacks",)

    def __init__(self):
        self.callbacks = []


# The backward passes running, innermost last (a hook may start one of its own): a gradient hook asks
# current_pass() which pass its gradient belongs to (autograd.graph.register_multi_grad_hook).
_passes = []


def current_pass():
    return _passes[-1] if _passes else None


def run_backward(roots, retain_graph=False, create_graph=False, captured=None, stop=False, targets=None):
    """_run_backward (the engine) as one BackwardPass, whose callbacks run once it succeeded; a composite's inner
    walk (stop) runs no hooks and belongs to the pass around it."""
    if stop:
        return _run_backward(roots, retain_graph, create_graph, captured, stop, targets)
    backward_pass = BackwardPass()
    _passes.append(backward_pass)
    try:
        _run_backward(roots, retain_graph, create_graph, captured, stop, targets)
    finally:
        _passes.pop()
    for callback in backward_pass.callbacks:
        callback()


def _run_backward(roots, retain_graph=False, create_graph=False, captured=None, stop=False, targets=None):
    """The engine: the seeds of `roots` ((tensor, gradient) pairs) back through the graph in topological order.
    captured: None, accumulate into leaves' .grad (and retain_grad tensors'); else a dict {id(tensor): None} of
    the tensors whose gradients are wanted, filled in instead, leaves' .grad left alone (autograd.grad; tensors
    that retain their gradient still get it where the walk reaches them, as in PyTorch).
    create_graph: the backward functions run with grad mode on, so the gradients get a graph of their own
    (higher-order gradients); a fused op whose backward function declares a `composite` (its definition in
    differentiable ops) is differentiated through that instead, and one that can be neither raises.
    stop: the captured tensors end the walk (a composite's inputs: what lies before them is not its graph).
    targets: {id(tensor): tensor} of the captured tensors (their gradient hooks run on what is captured)."""

    retained = {}  # captured tensors that retain their gradient: their .grad gets it too (see `wanted`)
    # Gradients of leaves with hooks are summed here and hooked once at the end (PyTorch's AccumulateGrad sees
    # the sum); `hooked`: id(node) -> its gradient after the hooks of the tensor it made (captured mode).
    pending, hooked = {}, {}
    hooks_on = bool(_leaf_hooks) and not stop

    def deliver(t, g):
        if captured is None:
            _accumulate(t, g, create_graph)
        elif id(t) in captured:
            captured[id(t)] = g if captured[id(t)] is None else captured[id(t)] + g
            if t._retains_grad and not stop:
                retained[id(t)] = t

    # tensors whose .grad receives their gradient as their node runs: those that called retain_grad(), in
    # autograd.grad's walks too (PyTorch's retains_grad hooks fire in any pass that reaches the tensor); captured
    # ones get theirs as it arrives (their node may not run at all: _leading_to)
    wanted = (lambda t: t._retains_grad) if not stop else (lambda t: False)
    with set_grad_enabled(create_graph):
        grads = {}
        for tensor, gradient in roots:
            if create_graph and not gradient.requires_grad:
                # Every gradient is linear in its seed: with the seed in the graph, a gradient that comes back
                # without one was made by a backward that cannot be differentiated (_check_differentiated).
                gradient = gradient.detach().requires_grad_()
            if tensor.grad_fn is None:  # a leaf: its gradient is the seed itself
                if hooks_on and _leaf_entry(tensor) is not None:
                    _pend(pending, tensor, gradient)
                else:
                    deliver(tensor, gradient)
                continue
            if captured is not None and id(tensor) in captured:
                deliver(tensor, gradient)
            slot = grads.get(id(tensor.grad_fn))
            if slot is None:
                grads[id(tensor.grad_fn)] = [gradient] + ([tensor] if wanted(tensor) else [])
            else:
                slot[0] = slot[0] + gradient
                if wanted(tensor) and not any(o is tensor for o in slot[1:]):
                    slot.append(tensor)
        if not grads:
            _finish(pending, hooked, captured, retained, deliver, create_graph, stop, targets)
            return
        order = _topological_order([tensor.grad_fn for tensor, _ in roots if tensor.grad_fn is not None])
        if captured is not None:  # only the nodes on a path to a wanted tensor (torch.autograd.grad's walk)
            order = _leading_to(order, captured)
        for node in order:
            entry = grads.pop(id(node), None)
            if entry is None:
                continue
            grad_out = entry[0] = _dense(entry[0])
            if node.backward_fn is None:
                raise RuntimeError(
                    f"Trying to backward through the graph a second time (through {node!r}); its saved tensors "
                    "were freed after the first backward. Pass retain_graph=True to the first backward() call."
                )
            if node.clock != _clock[0]:  # something was written in place since the node ran
                _check_saved(node)
            if node.hooks and not stop:
                grad_out = entry[0] = _run_hooks(node.hooks, grad_out)
                if captured is not None:
                    hooked[id(node)] = grad_out
            for o in entry[1:]:  # the tensors this node made that retain their gradient
                _accumulate(o, grad_out, create_graph)
                retained.pop(id(o), None)
            composite = getattr(node.backward_fn, "composite", None) if create_graph else None
            profiled = None if PROFILER is None else PROFILER.begin_backward(node)  # webgrad.profiler's range
            if node.saved is not None:
                _unpack_closure(node)
            input_grads = node.backward_fn(grad_out) if composite is None else _composite_grads(composite, grad_out)
            if node.saved is not None:
                _release_closure(node, keep=retain_graph)
            if profiled is not None:
                PROFILER.end(profiled)
            if node.post_hooks:
                input_grads = _run_post_hooks(node, input_grads, grad_out)
            if is_anomaly_enabled():
                input_grads = check_anomaly(node, [_dense(g) for g in input_grads])
            if create_graph:
                _check_differentiated(node, input_grads)
            if not retain_graph:
                node.backward_fn = None
            # Each gradient is taken out of the list as it is used, so that the list does not count as an
            # owner when _owned asks whether anyone else holds it.
            input_grads = list(input_grads)
            inputs = node.inputs
            for i in range(min(len(inputs), len(input_grads))):
                t, g = inputs[i], input_grads[i]
                input_grads[i] = None
                if t is None or g is None:
                    continue
                if type(g) is SliceGrad and (t.grad_fn is None or stop or captured is not None
                                             or g.dtype is not t.dtype):
                    g = g.dense()  # (kept lazy only on its way to another node: see SliceGrad)
                # A backward rule must match its input's shape (t: a leaf Tensor, or an Edge holding a tuple).
                if (g.shape if type(g) is SliceGrad or g.is_sparse else g._view.shape) != \
                        (t._view.shape if t.grad_fn is None else t.shape):
                    raise RuntimeError(f"internal error: {node!r} produced a gradient of shape "
                                       f"{tuple(g.shape)} for an input of shape {tuple(t.shape)}")
                if g.dtype is not t.dtype and t.dtype.is_floating:  # as PyTorch's engine (autocast's casts)
                    g = g.to(t.dtype)
                if stop:
                    tensor = t if t.grad_fn is None else t.tensor()
                    if tensor is not None and id(tensor) in captured:
                        deliver(tensor, g)
                        continue
                if t.grad_fn is None:
                    if hooks_on and _leaf_entry(t) is not None:
                        _pend(pending, t, g)
                    elif captured is not None:
                        deliver(t, g)
                    elif t.grad is None and not create_graph and not g.is_sparse and _stealable(g, t) and \
                            _refcounts(g) == tuple(_owned_counts()[:3]):
                        t.grad = g  # nobody else can see it: no copy needed (PyTorch's AccumulateGrad steals too)
                    else:
                        _accumulate(t, g, create_graph)
                    continue
                slot = grads.get(id(t.grad_fn))
                if slot is None:
                    slot = grads[id(t.grad_fn)] = [g]
                else:
                    slot[0] = _add_grads(slot[0], g)
                tensor = t.tensor()
                if tensor is None:
                    continue
                if captured is not None and id(tensor) in captured:
                    deliver(tensor, g)
                if wanted(tensor) and not any(o is tensor for o in slot[1:]):
                    slot.append(tensor)
        _finish(pending, hooked, captured, retained, deliver, create_graph, stop, targets)


def _pend(pending, t, g):
    slot = pending.get(id(t))
    if slot is None:
        pending[id(t)] = [t, g]
    else:
        slot[1] = _add_grads(slot[1], g)


def _finish(pending, hooked, captured, retained, deliver, create_graph, stop=False, targets=None):
    """The end of a backward walk: leaves with hooks get their summed gradient through the hooks (then .grad,
    then the post-accumulate hooks); captured non-leaves whose tensor has hooks get the hooked gradient."""
    for t, g in pending.values():
        entry = _leaf_entry(t)
        if captured is not None and id(t) not in captured:
            continue
        g = _dense(g)
        if entry is not None and entry[1]:
            g = _run_hooks(entry[1], g)
        if captured is not None:
            deliver(t, g)
            continue
        _accumulate(t, g, create_graph)
        if entry is not None:
            for hook in list(entry[2].values()):
                hook(t)
    if captured is not None and not stop and targets:
        for key, g in list(captured.items()):
            tensor = None
            if g is not None and key not in pending:
                tensor = targets.get(key)
            node = tensor.grad_fn if tensor is not None else None
            if node is not None and node.hooks:
                captured[key] = hooked[id(node)] if id(node) in hooked else _run_hooks(node.hooks, g)
    for key, tensor in retained.items():  # captured, their own node never ran: .grad gets the captured sum
        _accumulate(tensor, captured[key], create_graph)


def _leading_to(order, captured):
    """The nodes of `order` (each before the nodes it depends on) from which a tensor of `captured` is reached:
    the rest need not run (and under create_graph might not be differentiable at all)."""
    needed = set()
    for node in reversed(order):  # dependencies first
        for t in node.inputs:
            if t is None:
                continue
            tensor = t if t.grad_fn is None else t.tensor()
            if (tensor is not None and id(tensor) in captured) or (t.grad_fn is not None and id(t.grad_fn) in needed):
                needed.add(id(node))
                break
    return [node for node in order if id(node) in needed]


def _composite_grads(composite, grad_out):
    """The input gradients of a fused op through its definition in differentiable ops: composite() runs it
    again on the op's own inputs and returns (output, inputs); the walk stops at those inputs, so the
    gradients are functions of them, differentiable further (create_graph)."""
    out, inputs = composite()
    captured = {id(t): None for t in inputs if t is not None and getattr(t, "requires_grad", False)}
    # (retain_graph: the gradients made here reach back into this graph when they are differentiated)
    run_backward([(out, grad_out)], retain_graph=True, create_graph=True, captured=captured, stop=True)
    return tuple(captured.get(id(t)) if t is not None else None for t in inputs)


def _check_differentiated(node, input_grads):
    """With create_graph every upstream gradient carries a graph (run_backward puts the seeds in it), and a
    backward function is linear in it: a gradient that comes back without a graph was made by a kernel run
    directly, which a higher-order gradient would silently take for a constant. Refuse it, naming the op
    (a piecewise-constant op's zeros excepted: constant_gradient)."""
    if getattr(node.backward_fn, "constant_gradient", False):
        return
    for t, g in zip(node.inputs, input_grads):
        if t is not None and g is not None and not g.requires_grad:
            raise NotImplementedError(
                f"create_graph=True: the gradient of {node.name_()} cannot be differentiated again in webgrad "
                "yet (its backward is a kernel without a derivative of its own); higher-order gradients "
                "through this op are not supported")


def _stealable(g, t):
    """Whether gradient `g` may become leaf `t`'s .grad as it is, if no one else holds it (see _refcounts):
    a plain tensor without history on t's device, laid out as t, filling its whole storage."""
    view = g._view
    return (type(g) is _owned_counts()[3] and g.grad_fn is None and not g.requires_grad
            and g.device == t.device and view.offset == 0 and view.is_contiguous()
            and t._view.strides == view.strides and getattr(view.storage, "numel", None) == view.numel)


def _refcounts(g):
    """sys.getrefcount of a gradient, of its view and of its storage. backward calls it with `g` a local
    variable it took out of the closure's result list; when the counts equal _owned_counts() (the same
    call made for a fresh tensor that nothing else holds), no one else holds the gradient, its view or its
    storage, and it can become the leaf's .grad without the copy _accumulate makes: PyTorch's
    AccumulateGrad steals a gradient nobody else references in the same way. Measured, not assumed:
    interpreter versions count stack references differently (CPython 3.14 borrows some)."""
    return sys.getrefcount(g), sys.getrefcount(g._view), sys.getrefcount(g._view.storage)


_OWNED_COUNTS = []
_TENSOR = []  # the Tensor class, registered by _tensor.py as it is defined (the engine never imports it)


def register_tensor_type(cls):
    _TENSOR[:] = [cls]


def _owned_counts():
    if not _OWNED_COUNTS:
        Tensor = _TENSOR[0]

        class _Storage:
            numel = 1

        made = [Tensor._make(View(_Storage(), (1,), (1,), 0, None), None)]
        g = made[0]
        made[0] = None
        _OWNED_COUNTS.extend((*_refcounts(g), Tensor))  # the same call as backward's, made the same way
    return _OWNED_COUNTS


def accumulate_into(t, g, keep_graph=False):
    """Add g into t.grad (Tensor.backward(inputs=...)): a leaf's, or a non-leaf's as if it retained its grad."""
    if t.grad is None:
        t.grad = g if keep_graph else g.detach().clone()
    else:
        t.grad = _sum_grads(t.grad, g)


def _accumulate(t, g, keep_graph=False):
    """Add g into t.grad, as PyTorch does for leaves and for tensors that called retain_grad(). keep_graph
    (create_graph): .grad keeps g's graph, so that it can be differentiated again."""
    if t.grad_fn is not None and not t._retains_grad:
        return
    if keep_graph:
        t.grad = g if t.grad is None else _sum_grads(t.grad, g)
        return
    if t.grad is None:
        # Own copy: one gradient object can reach several tensors (x + y sends g to both), and users
        # and optimizers modify .grad in place.
        t.grad = g.detach().clone()
    else:
        t.grad = _sum_grads(t.grad, g)

