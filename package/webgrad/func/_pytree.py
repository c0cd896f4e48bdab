"""Nested Python containers of tensors (pytrees) as torch.func reads them: tuples, lists, dicts (OrderedDicts)
and namedtuples are nodes, anything else (a tensor, a number, None) is a leaf.

flatten(tree) gives the leaves in order and a Spec that unflatten(leaves, spec) rebuilds the tree from;
broadcast_prefix(prefix, spec) spreads a prefix tree (vmap's in_dims and out_dims) over a tree's leaves.
"""

from collections import OrderedDict


class Spec:
    """The shape of a pytree: its node type, the keys of a dict node and the specs of its children (a leaf has
    no type and no children)."""

    __slots__ = ("type", "keys", "children", "num_leaves")

    def __init__(self, node_type=None, keys=None, children=()):
        self.type, self.keys, self.children = node_type, keys, tuple(children)
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in self.children)

    def is_leaf(self):
        return self.type is None

    def __eq__(self, other):
        return (isinstance(other, Spec) and self.type is other.type and self.keys == other.keys
                and self.children == other.children)

    def __hash__(self):
        return hash((self.type, self.keys, self.children))

    def __repr__(self, indent=0):
        """As torch's TreeSpec prints (error messages quote it): a child per line, indented by depth."""
        if self.is_leaf():
            return "*"
        if self.keys is not None:
            context = list(self.keys)
        else:
            context = self.type if self.type not in (list, tuple) else None
        indent += 2
        children = (",\n" + " " * indent).join(c.__repr__(indent) for c in self.children)
        name = "namedtuple" if issubclass(self.type, tuple) and self.type is not tuple else self.type.__name__
        return f"TreeSpec({name}, {context}, [{children}])"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(tree):
    """(node type, dict keys or None, children) of a node, or None for a leaf."""
    if isinstance(tree, (list, tuple)) and (type(tree) in (list, tuple) or _is_namedtuple(tree)):
        return type(tree), None, list(tree)
    if isinstance(tree, dict) and type(tree) in (dict, OrderedDict):
        keys = tuple(tree)
        return type(tree), keys, [tree[k] for k in keys]
    return None


def flatten(tree):
    """(the leaves of `tree` in order, its Spec)."""
    leaves = []

    def walk(node):
        parts = _children(node)
        if parts is None:
            leaves.append(node)
            return Spec()
        node_type, keys, children = parts
        return Spec(node_type, keys, [walk(c) for c in children])

    return leaves, walk(tree)


def unflatten(leaves, spec):
    """The tree of `spec` with `leaves` in its leaves' places."""
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"treespec expects {spec.num_leaves} leaves, got {len(leaves)}")
    position = iter(leaves)

    def build(s):
        if s.is_leaf():
            return next(position)
        children = [build(c) for c in s.children]
        if s.keys is not None:
            return s.type(zip(s.keys, children))
        if s.type is list:
            return children
        if s.type is tuple:
            return tuple(children)
        return s.type(*children)  # a namedtuple

    return build(spec)


def tree_map(fn, tree):
    leaves, spec = flatten(tree)
    return unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, spec):
    """The leaves of `prefix` spread over the leaves of the tree of `spec`: a leaf of `prefix` stands for the
    whole subtree in its place. None where `prefix` is not a prefix of that tree."""
    out = []

    def walk(p, s):
        parts = _children(p)
        if parts is None:
            out.extend([p] * s.num_leaves)
            return True
        node_type, keys, children = parts
        if s.is_leaf() or len(children) != len(s.children):
            return False
        if keys is not None:  # dicts match by key, whatever their order
            if s.keys is None or set(keys) != set(s.keys):
                return False
            by_key = dict(zip(keys, children))
            return all(walk(by_key[k], c) for k, c in zip(s.keys, s.children))
        if node_type is not s.type:  # as torch's: a tuple of in_dims does not match a list of inputs
            return False
        return all(walk(pc, c) for pc, c in zip(children, s.children))

    return out if walk(prefix, spec) else None
