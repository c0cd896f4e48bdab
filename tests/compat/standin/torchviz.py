"""torchviz stand-in: make_dot walks the autograd graph as torchviz does (each output's grad_fn, then every
next_functions entry, a leaf's AccumulateGrad.variable) and returns a Digraph that renders nothing. A graph the
library cannot walk still raises, under webgrad and the real torch alike."""


class Digraph:
    """The graphviz object make_dot returns: its nodes and edges as text (``source``), nothing drawn."""

    def __init__(self, nodes, edges):
        self.nodes, self.edges = nodes, edges

    @property
    def source(self):
        return "\n".join([f"node {n}" for n in self.nodes] + [f"edge {a} -> {b}" for a, b in self.edges])

    def render(self, *args, **kwargs):
        return None

    def _repr_svg_(self):
        return ""


def _fn_name(fn):
    name = getattr(fn, "name", None)
    return name() if callable(name) else str(name or type(fn).__name__)


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    names = {id(v): k for k, v in (params or {}).items()}
    outputs = var if isinstance(var, tuple) else (var,)
    nodes, edges, seen = [], [], set()
    stack = [(t.grad_fn, names.get(id(t), "output")) for t in outputs if t.grad_fn is not None]
    while stack:
        fn, label = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        variable = getattr(fn, "variable", None)  # AccumulateGrad: the leaf it fills
        nodes.append(f"{_fn_name(fn)} ({names.get(id(variable), label) if variable is not None else label})")
        for next_fn, _ in fn.next_functions:
            if next_fn is not None:
                edges.append((_fn_name(next_fn), _fn_name(fn)))
                stack.append((next_fn, label))
    return Digraph(nodes, edges)
