"""The dashboard's checkpoints (webgrad.apps.mnist.checkpoint) with a valid digest and hostile contents: a
state nested too deep for json.loads, malformed tags, a run's entries of the wrong form. unpack raises
CheckpointError, its one error, for every one of them (tests/io/test_fuzz_file_readers.py fuzzes it)."""

import json

import pytest

import webgrad as wg
from webgrad.apps.mnist import checkpoint
from webgrad.apps.mnist.checkpoint import CheckpointError


def _state():
    model = wg.nn.Linear(2, 2)
    return {"config": {"model": "mlp"}, "model": model.state_dict(),
            "optimizer": wg.optim.SGD(model.parameters(), lr=0.1).state_dict(),
            "progress": {"step": 1, "epochs_done": 0, "steps_per_epoch": 4, "total_steps": 8, "elapsed_s": 0.5},
            "history": {"loss": [[1, 0.5]], "accuracy": []}, "rng": {"now": [0, 4], "epoch": [0, [0, 0]]}}


def _resigned(raw, key, text):
    """The checkpoint with metadata entry `key` replaced by `text` and its digest made again."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header["__metadata__"]
    meta.pop("sha256")
    meta[key] = text
    data = raw[8 + n:]
    meta["sha256"] = checkpoint._digest(meta, data)
    out = json.dumps(header, separators=(",", ":")).encode()
    out += b" " * (-len(out) % 8)
    return len(out).to_bytes(8, "little") + out + data


def _with_state(edit):
    raw = checkpoint.pack(_state(), {"model": "mlp"})
    n = int.from_bytes(raw[:8], "little")
    tree = json.loads(json.loads(raw[8:8 + n])["__metadata__"]["state"])
    edit(tree)
    return _resigned(raw, "state", json.dumps(tree))


def test_a_valid_checkpoint_unpacks():
    state, summary = checkpoint.unpack(checkpoint.pack(_state(), {"model": "mlp"}), required=checkpoint.RUN_KEYS)
    assert state["progress"]["step"] == 1 and summary == {"model": "mlp"}


@pytest.mark.parametrize("key,text,match", [
    ("state", "[" * 100_000 + "]" * 100_000, "nests 100000 levels deep"),
    ("summary", '{"a":' * 5000 + "1" + "}" * 5000, "nests 5000 levels deep"),
    ("summary", "[1, 2]", "summary is not an object"),
    ("state", "{", "state is not valid JSON"),
])
def test_hostile_json_is_refused(key, text, match):
    raw = _resigned(checkpoint.pack(_state(), {"model": "mlp"}), key, text)
    with pytest.raises(CheckpointError, match=match):
        checkpoint.unpack(raw, required=checkpoint.RUN_KEYS)


@pytest.mark.parametrize("edit,match", [
    (lambda t: t["model"].update({"weight": {"$t": 5}}), "names a tensor '5'"),
    (lambda t: t.update({"history": {"$float": "x"}}), "unknown or malformed entry"),
    (lambda t: t.update({"history": {"$items": [[1]]}}), "unknown or malformed entry"),
    (lambda t: t.update({"history": {"$tuple": 3}}), "unknown or malformed entry"),
    (lambda t: t["progress"].update({"step": 1.5}), "progress is not what this page writes"),
    (lambda t: t.update({"progress": [1, 2]}), "progress is not what this page writes"),
    (lambda t: t.update({"optimizer": "adam"}), "optimizer is not what this page writes"),
    (lambda t: t.update({"history": {"loss": [[1]]}}), "history is not what this page writes"),
    (lambda t: t.update({"rng": {"now": "x"}}), "rng is not what this page writes"),
])
def test_hostile_states_are_refused(edit, match):
    with pytest.raises(CheckpointError, match=match):
        checkpoint.unpack(_with_state(edit), required=checkpoint.RUN_KEYS)
