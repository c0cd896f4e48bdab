"""torch.save(model, f) of a whole module and torch.load(f, weights_only=False) for files the user trusts; the
restricted reader still the default (a module refused with PyTorch's UnpicklingError and message); the allowlist
of torch.serialization (add_safe_globals, safe_globals) as torch's."""

import io
import pickle
import re

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.modules  # noqa: F401  (torch.nn.modules's paths, as as_torch() imports them)
from helpers import DEVICES


class TinyLM(nn.Module):
    """A model of the user's own, with a tied weight, a buffer and a function stored as an attribute."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.body = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
        self.head = nn.Linear(8, 10)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", wg.tensor([0.5]))
        self.act = nn.functional.relu

    def forward(self, tokens):
        return self.head(self.act(self.body(self.emb(tokens)))) * self.scale


ALLOWED = [TinyLM, nn.Embedding, nn.TransformerEncoder, nn.TransformerEncoderLayer, nn.MultiheadAttention,
           nn.ModuleList, nn.Dropout, nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear, nn.LayerNorm,
           nn.functional.relu]


def _saved(model):
    buf = io.BytesIO()
    wg.save(model, buf)
    return buf.getvalue()


def _np(t):
    return t.detach().to("cpu").numpy()


def _same_model(a, b, device):
    tokens = wg.tensor(np.random.default_rng(0).integers(0, 10, (5, 2)), device=device)
    np.testing.assert_array_equal(_np(a.eval()(tokens)), _np(b.eval()(tokens)))
    assert list(a.state_dict()) == list(b.state_dict())
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(_np(v), _np(w), err_msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_whole_module_round_trip_trusted(device):
    wg.manual_seed(0)
    model = TinyLM().to(device)
    loaded = wg.load(io.BytesIO(_saved(model)), weights_only=False)
    assert type(loaded) is TinyLM and loaded is not model
    _same_model(model, loaded, device)
    # parameters stay Parameters on the device they were saved from, the tied weight stays one object
    assert all(type(p) is nn.Parameter and p.device.type == device for p in loaded.parameters())
    assert loaded.head.weight is loaded.emb.weight
    assert loaded.act is nn.functional.relu
    # map_location overrides where the tensors go
    on_cpu = wg.load(io.BytesIO(_saved(model)), map_location="cpu", weights_only=False)
    assert {p.device.type for p in on_cpu.parameters()} == {"cpu"}
    # it trains: gradients reach the loaded parameters
    loaded.train()
    loaded(wg.tensor([[1, 2]], device=device)).sum().backward()
    assert all(p.grad is not None for p in loaded.parameters())


def _wo_message(text):
    """The part of torch's weights-only message that does not depend on the global's name."""
    text = text.replace("\x1b[1m", "").replace("\x1b[0m", "")
    return re.sub(r"GLOBAL \S+ was|\[[^\]]*\]\)", "<name>", text)


def test_weights_only_default_refuses_a_module_as_torch(tmp_path):
    raw = _saved(TinyLM())
    with pytest.raises(pickle.UnpicklingError) as ours:
        wg.load(io.BytesIO(raw))
    assert "GLOBAL test_whole_module.TinyLM was not an allowed global by default" in str(ours.value)
    assert "torch.serialization.add_safe_globals([test_whole_module.TinyLM])" in str(ours.value)
    # the same text as torch's for a module of its own
    tbuf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 2), tbuf)
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(io.BytesIO(tbuf.getvalue()))
    assert _wo_message(str(ours.value)) == _wo_message(str(theirs.value))
    # weights_only=True said explicitly is the same
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        wg.load(io.BytesIO(raw), weights_only=True)


def test_safe_globals_allow_a_weights_only_load():
    wg.manual_seed(1)
    model = TinyLM()
    raw = _saved(model)
    assert wg.serialization.get_safe_globals() == []
    with wg.serialization.safe_globals(ALLOWED):
        assert wg.serialization.get_safe_globals() == ALLOWED
        loaded = wg.load(io.BytesIO(raw))
    assert wg.serialization.get_safe_globals() == []
    _same_model(model, loaded, "cpu")
    assert all(type(p) is nn.Parameter for p in loaded.parameters())
    assert loaded.head.weight is loaded.emb.weight
    # one class short: refused, naming it
    with wg.serialization.safe_globals([g for g in ALLOWED if g is not nn.LayerNorm]):
        with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL webgrad\.nn\.normalization\.LayerNorm was not"):
            wg.load(io.BytesIO(raw))
    # add_safe_globals lasts until cleared; a (object, "module.name") pair allowlists under that name
    try:
        wg.serialization.add_safe_globals(ALLOWED[1:] + [(TinyLM, "test_whole_module.TinyLM")])
        _same_model(model, wg.load(io.BytesIO(raw)), "cpu")
    finally:
        wg.serialization.clear_safe_globals()
    with pytest.raises(pickle.UnpicklingError):
        wg.load(io.BytesIO(raw))


def test_safe_globals_decorates_and_checks_its_entries():
    raw = _saved(TinyLM())

    @wg.serialization.safe_globals(ALLOWED)
    def load():
        return wg.load(io.BytesIO(raw))

    assert type(load()) is TinyLM and wg.serialization.get_safe_globals() == []
    with pytest.raises(ValueError, match="Expected tuple of length 2"):
        wg.serialization.add_safe_globals([(TinyLM, "a", "b")])
    with pytest.raises(TypeError, match="Expected second item in tuple to be str"):
        wg.serialization.add_safe_globals([(TinyLM, 3)])
    with pytest.raises(TypeError):
        wg.serialization.add_safe_globals(TinyLM)


def test_allowlisted_classes_do_not_open_the_door_to_other_globals():
    """An allowlisted file may still name only the allowlisted globals: os.system next to them is refused unrun,
    and a storage id left outside a tensor is refused."""
    from tools.fuzz_readers import P, Raw, zip_archive
    evil = zip_archive({"data.pkl": P().value({"x": Raw(P().glob("os", "system").value(("true",)).op(b"R").out[2:])}
                                              ).done(), "version": b"3\n"})
    with wg.serialization.safe_globals(ALLOWED):
        with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL os\.system was not an allowed global"):
            wg.load(io.BytesIO(evil))
        # NEWOBJ of something that is not an allowlisted class
        newobj = zip_archive({"data.pkl": P().value({"x": Raw(P().glob("collections", "OrderedDict").value(())
                                                               .op(b"\x81").out[2:])}).done(), "version": b"3\n"})
        with pytest.raises(pickle.UnpicklingError, match="can only create new objects of classes allowlisted"):
            wg.load(io.BytesIO(newobj))


def test_state_dicts_load_as_before():
    """A checkpoint of plain data still reads without any allowlist, tensors as plain tensors."""
    buf = io.BytesIO()
    wg.save({"model": TinyLM().state_dict(), "epoch": 3}, buf)
    got = wg.load(io.BytesIO(buf.getvalue()))
    assert got["epoch"] == 3 and type(got["model"]["emb.weight"]) is wg.Tensor


def test_torch_whole_module_loads_in_webgrad_trusted():
    """A torch.save of torch's own modules: the classes of the same names are webgrad's (weights_only=False)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))
    buf = io.BytesIO()
    torch.save(model, buf)
    loaded = wg.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert type(loaded) is nn.Sequential and type(loaded[0]) is nn.Linear
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(_np(loaded(wg.tensor(x))), model(torch.tensor(x)).detach().numpy(), atol=1e-6)
