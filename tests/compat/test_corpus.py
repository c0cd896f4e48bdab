"""Real PyTorch training scripts nobody tuned webgrad for (tests/compat/corpus/, run by webgrad.testing.corpus)
run unchanged under webgrad.as_torch(): every script on the CPU backend, a cheap subset on WebGPU. An 'exact'
script's printed losses must match the real torch's (recorded in corpus_reference.json, or run live where torch is
installed and the record is stale).

A script that does not run yet is xfail(strict=True) with the first thing it is missing: when a fix makes it pass,
the XPASS fails this file and its mark must go. The third-party scripts are not committed (corpus_manifest.json
names each file's source and hash); without them these tests skip."""

import importlib.util
import os

import pytest
from helpers import webgpu_available
from webgrad.testing import corpus

ROOT = os.path.dirname(os.path.abspath(__file__))
HAVE_TORCH = importlib.util.find_spec("torch") is not None

# the first failure of each script that does not run yet (exact torch name and call form)
XFAIL = {
    "ex_mnist_hogwild": "model.share_memory() raises: webgrad cannot share tensors between processes (Hogwild! "
                        "training needs one model's weights in shared memory)",
    "tut_swap_tensors": "torch.ops.aten is missing (AttributeError): its __torch_dispatch__ wrapper subclass "
                        "(Tensor._make_wrapper_subclass) needs the aten op overloads; torch.utils.swap_tensors, "
                        "before it, passes",
}

# small scripts that run on the accelerator, through their own flag (ex_vae without --no-accel, nanogpt
# --device=webgpu) or, being device-neutral, on the default device the runner sets to webgpu; all compared with torch
WEBGPU = ["jj_two_layer_net_optim", "ex_vae", "nanogpt", "mz_autoencoder", "tut_blitz_neural_networks"]


def _params(names):
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XFAIL[n])) if n in XFAIL else n
            for n in names]


def _require(name):
    script = corpus.SCRIPTS[name]
    if not os.path.isfile(os.path.join(ROOT, "corpus", script.folder or name, script.entry)):
        pytest.skip(f"corpus script {name} is not present (its source is in corpus_manifest.json)")


@pytest.mark.parametrize("name", _params(list(corpus.SCRIPTS)))
def test_corpus_script_on_cpu(name):
    _require(name)
    verdict = corpus.check(name, "cpu", with_torch=HAVE_TORCH, root=ROOT)
    assert verdict.ok, verdict.detail


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
@pytest.mark.parametrize("name", _params(WEBGPU))
def test_corpus_script_on_webgpu(name):
    _require(name)
    verdict = corpus.check(name, "webgpu", with_torch=HAVE_TORCH, root=ROOT)
    assert verdict.ok, verdict.detail


def test_corpus_files_are_the_published_ones():
    """Each file present is byte for byte the one the manifest names (its source text plus the source line), and
    each table entry's source is its entry file's first line."""
    if not os.path.isdir(os.path.join(ROOT, "corpus", "ex_mnist")):
        pytest.skip("the corpus scripts are not present")
    assert corpus.verify_manifest(ROOT) == []
    for name, script in corpus.SCRIPTS.items():
        with open(os.path.join(ROOT, "corpus", script.folder or name, script.entry)) as f:
            assert f.readline().startswith(f"# source: {script.source}"), name


def test_overrides_name_constants_the_scripts_assign():
    """A table override or call argument that matches nothing in the script is refused, so the table cannot
    silently stop capping a run."""
    if not os.path.isdir(os.path.join(ROOT, "corpus", "ex_mnist")):
        pytest.skip("the corpus scripts are not present")
    for name, script in corpus.SCRIPTS.items():
        folder = os.path.join(ROOT, "corpus", script.folder or name)
        if script.overrides or script.calls:
            corpus._compile(os.path.join(folder, script.entry), script.overrides, script.calls)
        for sibling, overrides in script.prepare:
            corpus._compile(os.path.join(folder, sibling), overrides)
    with pytest.raises(ValueError, match="no_such_constant"):
        corpus._compile(os.path.join(ROOT, "corpus", "ngvl_gpt", "gpt.py"), {"no_such_constant": 1})
    if os.path.isdir(os.path.join(ROOT, "corpus", "tut_seq2seq_translation")):
        path = os.path.join(ROOT, "corpus", "tut_seq2seq_translation", "seq2seq_translation_tutorial.py")
        with pytest.raises(ValueError, match="no_such_call"):
            corpus._compile(path, {}, {"no_such_call": {0: 1}})
        with pytest.raises(ValueError, match="no argument 'no_such_keyword'"):
            corpus._compile(path, {}, {"trainIters": {"no_such_keyword": 1}})
