"""safetensors files built to hurt: huge shapes, deep JSON, wrong types, lone surrogates, and a seeded fuzz
of 12,000 mutated files. Every refusal is a ValueError, none is slow, and webgrad accepts exactly what the
reference `safetensors` package accepts (less the dtypes webgrad cannot hold)."""

import io
import json
import random
import struct
import time

import pytest

import webgrad as wg

reference = pytest.importorskip("safetensors")


def _file(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _entry(shape=(1,), offsets=(0, 1), dtype="U8", **extra):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets), **extra}


def _reference_accepts(raw):
    try:
        reference.deserialize(raw)
        return True
    except Exception:  # SafetensorError: the Rust reader's refusal
        return False


HOSTILE = [
    # (raw file, what the error says)
    (_file({"a": _entry(shape=[2**62] * 60000, offsets=(0, 0))}), "element count overflows 64 bits at dim 1"),
    (_file({"a": _entry(shape=[2**64], offsets=(0, 0))}), "dim 0 of its shape must be a non-negative int below 2"),
    (_file({"a": _entry(shape=[0, 2**64 - 1], offsets=(0, 0))}, b""), None),  # legal: zero elements
    (_file({"a": _entry(shape=[2**32, 2**32, 0], offsets=(0, 0))}), "overflows 64 bits at dim 1"),
    (_file({"a": _entry(shape=[True], offsets=(0, 1))}, b"x"), "dim 0 of its shape must be a non-negative int"),
    (_file({"a": _entry(shape=[1.0], offsets=(0, 1))}, b"x"), "dim 0"),
    (_file(b'{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}'), "dim 0"),
    (_file(b'{"a":{"dtype":"U8","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,0]}}'), "not valid JSON"),
    (_file(b'{"a":{"dtype":"U8","shape":[1e999],"data_offsets":[0,0]}}'), "out of range"),
    (_file({"a": _entry(offsets=(False, True))}, b"x"), "data_offsets must be"),
    (_file({"a": _entry(offsets=(0, 1.0))}, b"x"), "data_offsets must be"),
    (_file({"a": _entry(offsets=(0, 1, 2))}, b"x"), "data_offsets must be"),
    (_file({"a": _entry(dtype=3)}, b"x"), "dtype must be a string, got 3"),
    (_file({"a": _entry(dtype=["U8"])}, b"x"), r"dtype must be a string, got \['U8'\]"),
    (_file({"a": _entry(dtype="u8")}, b"x"), "unknown or unsupported dtype 'u8'"),
    (_file({"__metadata__": 0}), "__metadata__ must be an object of strings, got 0"),
    (_file({"__metadata__": []}), "__metadata__ must be an object of strings"),
    (_file({"__metadata__": ""}), "__metadata__ must be an object of strings"),
    (_file({"__metadata__": {"epoch": 3}}), r"__metadata__\['epoch'\] must be a string, got 3"),
    (_file({"__metadata__": None}), None),  # null: no metadata, as in the reference
    (_file(b'{"__metadata__":{"a":NaN}}'), "NaN and Infinity literals"),
    (_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":Infinity}}', b"x"), "NaN and Infinity"),
    (_file(b'{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"), "lone surrogate"),
    (_file(b'{"__metadata__":{"k":"\\udfff"}}'), "lone surrogate"),
    (_file(b'{"\\ud83d\\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"), None),  # a valid pair
    (_file(b"[" * 100_000 + b"]" * 100_000), "nests 100000 levels deep"),
    (_file(b'{"__metadata__":' + b'{"a":' * 5000), "nests 5001 levels deep"),
    (_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + b"[" * 125 + b"]" * 125 + b"}}", b"x"),
     None),  # 127 levels in a field the reader ignores: the reference's limit, still accepted
    (_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + b"[" * 126 + b"]" * 126 + b"}}", b"x"),
     "nests 128 levels deep"),
    (_file(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":"[[[[[[[[[["}}', b"x"), None),  # in a string
    (_file(b"\xef\xbb\xbf{}"), "not valid JSON"),
]


@pytest.mark.parametrize("raw,message", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_headers_are_refused_fast_and_like_the_reference(raw, message):
    start = time.perf_counter()
    if message is None:
        wg.load(io.BytesIO(raw))
    else:
        with pytest.raises(ValueError, match=message) as info:
            wg.load(io.BytesIO(raw))
        assert len(str(info.value)) < 400  # the message names the problem without echoing a hostile header
    assert time.perf_counter() - start < 0.5
    assert _reference_accepts(raw) == (message is None)


def test_names_that_utf8_cannot_carry_are_refused_on_save():
    with pytest.raises(ValueError, match="lone surrogate"):
        wg.save({"w\ud800": wg.ones(1)}, io.BytesIO())
    with pytest.raises(ValueError, match="lone surrogate"):
        wg.save({"w": wg.ones(1)}, io.BytesIO(), metadata={"note": "\udc00"})
    buf = io.BytesIO()
    wg.save({"w\U0001F600": wg.ones(1)}, buf, metadata={"é": "ü"})  # any valid Unicode round-trips
    assert list(wg.load(io.BytesIO(buf.getvalue()))) == ["w\U0001F600"]


# ------------------------------------------------------------------------------------------------------ fuzz
HOSTILE_VALUES = [0, 1, -1, 2**31, 2**62, 2**64 - 1, 2**64, 2**200, True, False, None, 1.5, "", "F32", "BOGUS",
                  [], {}, [0], [1, 2], [2**62] * 40, [0, 2**64 - 1], [-1, 3], {"a": "b"}, {"a": 1}, [[[[1]]]]]
RAW_TOKENS = [b"NaN", b"-Infinity", b"-0", b"1e999", b"1e2", b'"\\ud800"', b'"\\udfff"', b"9" * 30, b"[" * 200,
              b"[" * 130 + b"]" * 130, b"{", b"}", b'"', b"\\"]


def _seeds():
    """Valid files of every dtype webgrad writes and reads, small enough that a case takes microseconds."""
    out = []
    for state in ({"w": wg.randn(2, 3), "b": wg.tensor([1.0, -2.0]), "n": wg.tensor([3, 4], dtype=wg.int32),
                   "p": wg.tensor(bytes([0, 7, 255])), "m": wg.tensor([True, False])},
                  {"e": wg.zeros(0, 4), "s": wg.tensor(2.5, dtype=wg.float64)},
                  {}):
        buf = io.BytesIO()
        wg.save(state, buf, metadata={"format": "pt"})
        out.append(buf.getvalue())
    out.append(_file({"h": _entry(dtype="F16", shape=[2], offsets=(0, 4)),
                      "i": _entry(dtype="I64", shape=[1], offsets=(4, 12))}, bytes(12)))
    return out


def _mutate(rng, raw):
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = raw[8:8 + n], raw[8 + n:]
    kind = rng.randrange(6)
    if kind >= 4:  # replace one value of the parsed header with a hostile one
        try:
            doc = json.loads(header)
        except ValueError:  # a header an earlier mutation broke: mutate its bytes instead
            kind = 0
    if kind == 0:  # flip bytes anywhere
        b = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == 1:  # cut or extend
        return raw[:rng.randrange(len(raw))] if rng.random() < 0.5 else raw + bytes(rng.randint(1, 16))
    if kind == 2:  # a wrong header length
        return struct.pack("<Q", rng.choice([0, 1, max(n - 1, 0), n + 1, n + 8, 2**63, 100 * 2**20 + 1])) + raw[8:]
    if kind == 3:  # splice a raw token into the header text
        at = rng.randrange(len(header) + 1)
        header = header[:at] + rng.choice(RAW_TOKENS) + header[at + rng.randint(0, 3):]
        return struct.pack("<Q", len(header)) + header + data
    parent, key, node = None, None, doc
    for _ in range(rng.randint(1, 3)):
        if isinstance(node, dict) and node:
            k = rng.choice(list(node))
        elif isinstance(node, list) and node:
            k = rng.randrange(len(node))
        else:
            break
        parent, key = node, k
        if rng.random() < 0.5 or not isinstance(node[k], (dict, list)):
            break
        node = node[k]
    if parent is None:
        doc["x" if rng.random() < 0.5 else "__metadata__"] = rng.choice(HOSTILE_VALUES)
    else:
        parent[key] = rng.choice(HOSTILE_VALUES)
    header = json.dumps(doc).encode()
    return struct.pack("<Q", len(header)) + header + (data if kind == 4 else data[:rng.randrange(len(data) + 1)])


# refusals of files the reference accepts: dtypes or values webgrad has no tensor for
WEBGRAD_ONLY_REFUSALS = ("unknown or unsupported dtype", "bytes other than 0 and 1", "do not fit in int32",
                         "which webgrad cannot load")


def test_fuzz_only_clean_errors_and_agreement_with_the_reference():
    rng = random.Random(15)
    seeds = _seeds()
    cases, loaded, refused, slowest = 12_000, 0, 0, 0.0
    start = time.perf_counter()
    for i in range(cases):
        raw = _mutate(rng, rng.choice(seeds))
        if rng.random() < 0.3:
            raw = _mutate(rng, raw) if len(raw) >= 8 and struct.unpack("<Q", raw[:8])[0] <= len(raw) - 8 else raw
        t0 = time.perf_counter()
        try:
            wg.load(io.BytesIO(raw))
            ok, error = True, None
        except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
            ok, error = False, str(e)
        except Exception as e:  # anything else is a bug: show the input that caused it
            raise AssertionError(f"case {i}: {type(e).__name__}: {e} for {raw[:300]!r}") from e
        slowest = max(slowest, time.perf_counter() - t0)
        ref = _reference_accepts(raw)
        if ok:
            loaded += 1
            assert ref, f"case {i}: webgrad loads a file the reference refuses: {raw[:300]!r}"
        else:
            refused += 1
            assert not ref or any(s in error for s in WEBGRAD_ONLY_REFUSALS), \
                f"case {i}: webgrad refuses a file the reference loads ({error}): {raw[:300]!r}"
            assert len(error) < 1000
    elapsed = time.perf_counter() - start
    print(f"\nsafetensors fuzz: {cases} cases, {loaded} loaded, {refused} refused, slowest {slowest * 1e3:.1f} ms, "
          f"{elapsed:.1f} s in all")
    assert slowest < 0.5
    assert loaded > 100 and refused > 5000  # both sides of the parser were exercised
