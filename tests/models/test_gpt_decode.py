"""GPT generation by a recorded decode step (models/gpt.py, _stream_replayed): on WebGPU each token after the first
two is one replay of a step that writes the caches at a position held on the device, attends over the whole cache
with the later positions masked, samples on the device and advances the position. Its tokens are the eager
path's (greedy and sampled, both attention forms, past block_size where the context is cropped and run again) and
PyTorch's greedy ones; steady tokens issue two dispatches besides the replay, read nothing back and create no
buffers or pipelines; a stream left early releases its recording."""

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad.models import GPTConfig
from webgrad.models.gpt import define

from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")

SMALL = GPTConfig(block_size=24, vocab_size=29, n_layer=2, n_head=4, n_embd=32)


def twins(flash=True, seed=0, dropout=0.0):
    torch.manual_seed(seed)
    config = GPTConfig(**{**SMALL.__dict__, "dropout": dropout})
    theirs = define(torch.nn).GPT(config, flash=flash)
    ours = define(wg.nn).GPT(config, flash=flash)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours.to("webgpu"), theirs


def _runtime():
    from webgrad._backends.webgpu.runtime import default_runtime
    return default_runtime()


@pytest.mark.parametrize("flash", [True, False])
def test_greedy_tokens_are_the_eager_paths_and_pytorchs(flash):
    ours, theirs = twins(flash, seed=1)
    ours.eval(), theirs.eval()
    prompt = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    steps = 30  # 4 + 30 > block_size 24: the context is cropped and run again past it
    ref = torch.from_numpy(prompt)
    with torch.no_grad():
        for _ in range(steps):
            logits, _ = theirs(ref[:, -SMALL.block_size:])
            ref = torch.cat([ref, logits[:, -1].argmax(-1, keepdim=True)], 1)
    rt = _runtime()
    before = rt.stats["replays"]
    replayed = ours.generate(wg.tensor(prompt, device="webgpu"), steps, top_k=1).tolist()
    assert rt.stats["replays"] - before >= 24 - 4 - 4  # (the prompt, an eager step, one or two recordings)
    eager = ours.generate(wg.tensor(prompt, device="webgpu"), steps, top_k=1, replay=False).tolist()
    assert replayed == eager == ref.tolist()


@pytest.mark.parametrize("flash", [True, False])
def test_sampled_tokens_are_the_eager_paths(flash):
    """The draws advance at each replay as they do per eager step: the same seed, the same tokens."""
    ours, _ = twins(flash, seed=2)
    ours.eval()
    prompt = wg.tensor([[3, 1, 4]], device="webgpu")
    runs = []
    for replay in (True, False):
        wg.manual_seed(7)
        runs.append(ours.generate(prompt, 26, temperature=0.9, top_k=8, replay=replay).tolist())
    assert runs[0] == runs[1]
    assert len(set(runs[0][0][3:])) > 3  # (sampled: not one token over and over)


def test_dropout_in_training_mode_draws_afresh_each_replay():
    """In training mode the dropouts draw inside the replayed step: each token, eager, recorded or replayed, takes
    as many counters of the generator as the one before (the cache's whole width, so not the eager path's count),
    and the same seed gives the same tokens."""
    ours, _ = twins(seed=3, dropout=0.2)
    prompt = wg.tensor([[2, 7]], device="webgpu")
    gen = wg.random.default_generator
    runs = []
    for _ in range(2):
        wg.manual_seed(4)
        stream, taken = ours.stream(prompt, 16), []
        tokens = [next(stream)]
        for _ in range(15):
            start = gen.offset
            tokens.append(next(stream))
            taken.append(gen.offset - start)
        runs.append(wg.cat(tokens, 1).tolist())
        assert len(set(taken)) == 1 and taken[0] > 0
    assert runs[0] == runs[1]
    ours.eval()
    wg.manual_seed(4)
    assert ours.generate(prompt, 16).tolist()[0][2:] != runs[0][0]


def test_a_steady_token_is_one_replay_and_two_dispatches():
    """Past the recording, a token is the replay, the copy of the last token into the step's input and the copy
    of its output: no read-back, no new buffer, pipeline or bind group."""
    ours, _ = twins(seed=4)
    ours.eval()
    rt = _runtime()
    stream = ours.stream(wg.tensor([[1, 2]], device="webgpu"), 12, temperature=0.8, top_k=5)
    tokens = [next(stream) for _ in range(6)]  # the prompt, an eager step, the recording(s), a replay
    keys = ("replays", "dispatches", "reads", "buffers_created", "pipelines_created", "bind_groups_created")
    before = {k: rt.stats[k] for k in keys}
    tokens += [next(stream) for _ in range(4)]
    after = {k: rt.stats[k] - before[k] for k in keys}
    replays = after.pop("replays")
    graph_dispatches = (after.pop("dispatches") - 2 * replays) // replays
    assert replays == 4 and graph_dispatches > 20
    assert after == {"reads": 0, "buffers_created": 0, "pipelines_created": 0, "bind_groups_created": 0}
    assert len({id(t) for t in tokens}) == len(tokens)  # each token its own tensor
    stream.close()


def test_a_stream_left_early_releases_its_recording():
    ours, _ = twins(seed=5)
    ours.eval()
    rt = _runtime()
    prompt = wg.tensor([[1, 2, 3]], device="webgpu")
    wg.webgpu.synchronize()
    wg.webgpu.empty_cache()
    base = wg.webgpu.memory_allocated()
    for _ in range(3):
        stream = ours.stream(prompt, 20, top_k=1)
        first = [next(stream).item() for _ in range(8)]
        stream.close()
    wg.webgpu.synchronize()
    assert rt.capturing is False
    assert first == ours.generate(prompt, 8, top_k=1, replay=False).tolist()[0][3:]
    del stream
    assert wg.webgpu.memory_allocated() <= base


@pytest.mark.parametrize("replay", [True, False])
def test_the_callers_code_keeps_its_grad_mode_between_tokens(replay):
    """stream() computes without grad but yields outside no_grad: a loop over its tokens may train."""
    ours, _ = twins(seed=6)
    states = [wg.is_grad_enabled() for _ in ours.stream(wg.tensor([[1, 2]], device="webgpu"), 6, replay=replay)]
    assert states == [True] * 6
