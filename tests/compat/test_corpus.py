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
    "tut_swap_tensors": "torch.Tensor._make_wrapper_subclass is missing (AttributeError): its __torch_dispatch__ "
                        "wrapper subclass needs PyTorch's dispatcher (torch.utils.swap_tensors and torch.ops.aten, "
                        "before it, pass)",
    "llm_kv_gqa": "bfloat16 arithmetic rounds otherwise than torch's: torch.pow(x, 3) rounds x**3 once where torch "
                  "rounds each product (x*x*x), and bf16 mean/var differ from torch's (the float32 result rounded "
                  "once) in a fifth of the values; one ulp lower, a logit that ties in torch loses the argmax at "
                  "the 7th generated token",
}

XFAIL.update({f"ex_fx_{name}": "torch.fx is missing (ModuleNotFoundError: No module named 'torch.fx'): symbolic_trace, "
              "Tracer, Proxy, Graph, GraphModule and its generated code, map_arg, wrap, replace_pattern"
              for name in ("inline_function", "invert", "module_tracer", "primitive_library", "profiling_tracer",
                           "proxy_based_graph_creation", "replace_op", "subgraph_rewriter_basic_use",
                           "wrap_output_dynamically")})

# small scripts that run on the accelerator, through their own flag (ex_vae without --no-accel, nanogpt
# --device=webgpu) or, being device-neutral, on the default device the runner sets to webgpu; all compared with torch
WEBGPU = ["jj_two_layer_net_optim", "ex_vae", "nanogpt", "mz_autoencoder", "tut_blitz_neural_networks", "nlp_bert",
          "ap_lenet5", "kc_densenet", "hk_pack_pad",
          "tut_seq2seq_translation"]  # writes CPU attention rows into a tensor of the default device (x[i] = v)


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


def test_calls_named_by_their_text_and_dict_overrides(tmp_path):
    """`range(5000)` in the table caps that loop alone (not the script's other range calls), and a config dict
    given whole replaces the script's."""
    path = tmp_path / "script.py"
    path.write_text("cfg = {'width': 768}\nfor i in range(1, 3):\n    pass\nfor epoch in range(5000):\n    pass\n")
    namespace = {}
    exec(corpus._compile(str(path), {"cfg": {"width": 32, "sizes": [1, 2]}}, {"range(5000)": {0: 7}}), namespace)
    assert namespace["cfg"] == {"width": 32, "sizes": [1, 2]} and namespace["epoch"] == 6 and namespace["i"] == 2
    with pytest.raises(ValueError, match=r"range\(4\)"):
        corpus._compile(str(path), {}, {"range(4)": {0: 1}})


def test_tiktoken_standin_has_tiktokens_surface():
    spec = importlib.util.spec_from_file_location("tiktoken_standin", os.path.join(ROOT, "standin", "tiktoken.py"))
    tiktoken = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiktoken)
    enc = tiktoken.get_encoding("gpt2")
    assert enc.n_vocab == 50257 and enc.eot_token == 50256
    ids = enc.encode("Hello, I am<|endoftext|>é", allowed_special={"<|endoftext|>"})
    assert ids[:3] == [72, 101, 108] and 50256 in ids and enc.decode(ids) == "Hello, I am<|endoftext|>é"
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode("a<|endoftext|>")
    assert enc.encode_ordinary("a<|endoftext|>")[:2] == [97, 60]
    with pytest.raises(ValueError, match="Unknown encoding"):
        tiktoken.get_encoding("no-such-encoding")
    assert tiktoken.encoding_for_model("gpt-4").name == "cl100k_base"


def test_tqdm_standin_wraps_without_drawing(capsys):
    spec = importlib.util.spec_from_file_location("tqdm_standin", os.path.join(ROOT, "standin", "tqdm.py"))
    tqdm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tqdm)
    loop = tqdm.tqdm(enumerate("abc"))
    assert [c for _, c in loop] == ["a", "b", "c"] and loop.n == 3
    loop.set_postfix(loss=1.0)
    assert len(tqdm.tqdm([1, 2])) == 2 and list(tqdm.trange(2)) == [0, 1]
    assert capsys.readouterr().out == ""


def test_then_calls_the_scripts_own_test_and_terminal_gives_a_tty(tmp_path, monkeypatch):
    """`then` calls a function the script defines once it has run (a model file's own test()); `terminal` gives a
    script that asks `stty size` a 24 x 80 pseudo-terminal, as a progress bar reading its width needs."""
    folder = tmp_path / "corpus" / "selftest"
    folder.mkdir(parents=True)
    (tmp_path / "standin").mkdir()
    (tmp_path / "corpus_data.py").write_text("def make(kind, path, **options):\n    raise ValueError(kind)\n")
    (folder / "script.py").write_text(
        "import os\nrows, columns = os.popen('stty size', 'r').read().split()\n\n\n"
        "def test():\n    print('rows', rows, 'columns', columns)\n\n# test()\n")
    monkeypatch.setitem(corpus.SCRIPTS, "selftest", corpus.Script(
        "script.py", "here", then="test", terminal=True, compare="runs", loss_re=r"rows (\d+) columns (\d+)"))
    run = corpus.run_script("selftest", "webgrad", "cpu", root=str(tmp_path))
    assert run.returncode == 0 and run.losses == [24.0, 80.0], run.stderr[-2000:]
    monkeypatch.setitem(corpus.SCRIPTS, "selftest", corpus.Script(
        "script.py", "here", then="test", compare="runs", loss_re=r"rows (\d+) columns (\d+)"))
    run = corpus.run_script("selftest", "webgrad", "cpu", root=str(tmp_path))
    assert run.returncode != 0 and "ValueError" in run.error  # no terminal: `stty size` prints nothing to split
