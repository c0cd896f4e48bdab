"""nn.Transformer, nn.TransformerDecoder(Layer) and generate_square_subsequent_mask against PyTorch with copied
weights (outputs and every gradient, on every device); state_dicts both ways; a subclass in the manner of
pytorch/examples' word_language_model."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn
import webgrad.nn.functional as F

from tests.helpers import DEVICES

ATOL = 2e-4


def _np(t):
    return t.detach().to("cpu").numpy() if isinstance(t, wg.Tensor) else t.detach().numpy()


def _close(a, b, atol=ATOL):
    np.testing.assert_allclose(_np(a), _np(b), rtol=1e-4, atol=atol)


def _pair(arr, device):
    return wg.tensor(arr, device=device, requires_grad=True), torch.tensor(arr, requires_grad=True)


def _copy(wmod, tmod, device):
    wmod.load_state_dict({k: wg.tensor(v.detach().numpy(), device=device) for k, v in tmod.state_dict().items()})


def _grads_match(wmod, tmod):
    wparams = dict(wmod.named_parameters())
    assert sorted(wparams) == sorted(n for n, _ in tmod.named_parameters())
    for name, tp in tmod.named_parameters():
        assert wparams[name].grad is not None, name
        _close(wparams[name].grad, tp.grad)


def _backward_both(out, ref, device, seed=5):
    g = np.random.default_rng(seed).standard_normal(tuple(ref.shape)).astype(np.float32)
    (out * wg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()


def test_square_subsequent_mask_is_torchs():
    for sz in (1, 4):
        _close(nn.Transformer.generate_square_subsequent_mask(sz),
               torch.nn.Transformer.generate_square_subsequent_mask(sz))
    m = nn.Transformer.generate_square_subsequent_mask(3, dtype=wg.float32, device="cpu")
    assert m.dtype == wg.float32 and tuple(m.shape) == (3, 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first, batch_first, activation",
                         [(False, False, "relu"), (True, True, "gelu"), (False, True, "relu")])
def test_decoder_layer_matches_torch(device, norm_first, batch_first, activation):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=12, activation=activation, norm_first=norm_first, batch_first=batch_first)
    tl = torch.nn.TransformerDecoderLayer(8, 2, **kw).eval()
    wl = nn.TransformerDecoderLayer(8, 2, **kw).to(device).eval()
    assert list(wl.state_dict()) == list(tl.state_dict())  # names and order
    _copy(wl, tl, device)
    rng = np.random.default_rng(1)
    tgt = _pair(rng.standard_normal((2, 5, 8) if batch_first else (5, 2, 8)).astype(np.float32), device)
    mem = _pair(rng.standard_normal((2, 3, 8) if batch_first else (3, 2, 8)).astype(np.float32), device)
    causal = np.triu(np.full((5, 5), -np.inf, np.float32), 1)
    pad = np.zeros((2, 3), bool)
    pad[0, -1] = True
    out = wl(tgt[0], mem[0], tgt_mask=wg.tensor(causal, device=device),
             memory_key_padding_mask=wg.tensor(pad, device=device))
    ref = tl(tgt[1], mem[1], tgt_mask=torch.tensor(causal), memory_key_padding_mask=torch.tensor(pad))
    _close(out, ref)
    _backward_both(out, ref, device)
    _close(tgt[0].grad, tgt[1].grad)
    _close(mem[0].grad, mem[1].grad)
    _grads_match(wl, tl)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(device, batch_first):
    torch.manual_seed(0)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
              batch_first=batch_first)
    tt = torch.nn.Transformer(**kw)
    wt = nn.Transformer(**kw).to(device)
    assert list(wt.state_dict()) == list(tt.state_dict())
    assert [tuple(p.shape) for p in wt.parameters()] == [tuple(p.shape) for p in tt.parameters()]
    _copy(wt, tt, device)
    rng = np.random.default_rng(2)
    shape = (lambda s: (2, s, 8)) if batch_first else (lambda s: (s, 2, 8))
    src, tgt = _pair(rng.standard_normal(shape(6)).astype(np.float32), device), \
        _pair(rng.standard_normal(shape(4)).astype(np.float32), device)
    src_pad = np.zeros((2, 6), bool)
    src_pad[1, -2:] = True
    wmask = nn.Transformer.generate_square_subsequent_mask(4, device=device)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    out = wt(src[0], tgt[0], tgt_mask=wmask, src_key_padding_mask=wg.tensor(src_pad, device=device),
             memory_key_padding_mask=wg.tensor(src_pad, device=device))
    ref = tt(src[1], tgt[1], tgt_mask=tmask, src_key_padding_mask=torch.tensor(src_pad),
             memory_key_padding_mask=torch.tensor(src_pad))
    _close(out, ref)
    _backward_both(out, ref, device)
    _close(src[0].grad, src[1].grad)
    _close(tgt[0].grad, tgt[1].grad)
    _grads_match(wt, tt)


@pytest.mark.parametrize("device", DEVICES)
def test_transformer_unbatched_and_errors(device):
    torch.manual_seed(0)
    tt = torch.nn.Transformer(8, 2, 1, 1, 8, dropout=0.0).eval()
    wt = nn.Transformer(8, 2, 1, 1, 8, dropout=0.0).to(device).eval()
    _copy(wt, tt, device)
    rng = np.random.default_rng(3)
    src, tgt = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((3, 8)).astype(np.float32)
    with torch.no_grad():
        ref = tt(torch.tensor(src), torch.tensor(tgt))
    _close(wt(wg.tensor(src, device=device), wg.tensor(tgt, device=device)), ref)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        wt(wg.zeros(5, 2, 8, device=device), wg.zeros(3, 1, 8, device=device))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        wt(wg.zeros(5, 2, 8, device=device), wg.zeros(3, 2, 4, device=device))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")


def test_state_dict_moves_both_ways():
    torch.manual_seed(0)
    wg.manual_seed(0)
    tt = torch.nn.Transformer(8, 2, 1, 2, 12, dropout=0.0).eval()
    wt = nn.Transformer(8, 2, 1, 2, 12, dropout=0.0).eval()
    # webgrad -> torch: torch's load_state_dict takes webgrad's tensors as arrays, every key matched strictly
    tt.load_state_dict({k: torch.tensor(_np(v)) for k, v in wt.state_dict().items()}, strict=True)
    rng = np.random.default_rng(4)
    src, tgt = rng.standard_normal((5, 2, 8)).astype(np.float32), rng.standard_normal((3, 2, 8)).astype(np.float32)
    with torch.no_grad():
        ref = tt(torch.tensor(src), torch.tensor(tgt))
    _close(wt(wg.tensor(src), wg.tensor(tgt)), ref)
    # default activation is F.relu itself, as torch's (pickles and fast-path flags look at it)
    assert wt.encoder.layers[0].activation is F.relu and wt.encoder.layers[0].activation_relu_or_gelu == 1
    assert type(wt.encoder.layers[0].self_attn.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def _word_lm(lib):
    """word_language_model's TransformerModel: super().__init__ with keywords, then parts replaced."""

    class TransformerModel(lib.nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
            self.input_emb = lib.nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = lib.nn.Linear(ninp, ntoken)

        def forward(self, src):
            mask = lib.log(lib.tril(lib.ones(len(src), len(src))))
            out = self.encoder(self.input_emb(src) * math.sqrt(self.ninp), mask=mask.to(src.device))
            return lib.nn.functional.log_softmax(self.decoder(out), dim=-1)

    return TransformerModel


@pytest.mark.parametrize("device", DEVICES)
def test_subclass_like_word_language_model(device):
    torch.manual_seed(0)
    tm = _word_lm(torch)(20, 8, 2, 16, 2).eval()
    wm = _word_lm(wg)(20, 8, 2, 16, 2).to(device).eval()
    # the replaced decoder is a Linear: the decoder stack's parameters are gone in both
    assert list(wm.state_dict()) == list(tm.state_dict())
    assert not any(k.startswith("decoder.layers") for k in wm.state_dict())
    _copy(wm, tm, device)
    tokens = np.random.default_rng(5).integers(0, 20, (7, 3))
    out = wm(wg.tensor(tokens, device=device))
    ref = tm(torch.tensor(tokens))
    _close(out, ref)
    _backward_both(out, ref, device)
    _grads_match(wm, tm)
