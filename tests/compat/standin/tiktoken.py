"""tiktoken stand-in: the real package downloads its BPE ranks on first use, which a test must not. Each named
encoding keeps tiktoken's surface (get_encoding, encoding_for_model, Encoding.encode/encode_ordinary/decode,
n_vocab, eot_token, special tokens and their allowed/disallowed checks) and vocabulary size, but encodes byte by
byte: token i < 256 is byte i, the special tokens keep their ids, and any other id decodes to the text "[id]". It
is deterministic and pure Python, so a script tokenises alike under webgrad and the real torch."""

import re

# name -> (n_vocab, {special token: id}) as the real encodings have them
_ENCODINGS = {
    "gpt2": (50257, {"<|endoftext|>": 50256}),
    "r50k_base": (50257, {"<|endoftext|>": 50256}),
    "p50k_base": (50281, {"<|endoftext|>": 50256}),
    "cl100k_base": (100277, {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                             "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
    "o200k_base": (200019, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}
_MODELS = {"gpt2": "gpt2", "davinci": "r50k_base", "text-davinci-003": "p50k_base", "gpt-3.5-turbo": "cl100k_base",
           "gpt-4": "cl100k_base", "gpt-4o": "o200k_base"}


class Encoding:
    def __init__(self, name, n_vocab, special_tokens):
        self.name = name
        self.n_vocab = n_vocab
        self.max_token_value = n_vocab - 1
        self._special_tokens = dict(special_tokens)
        self._special_by_id = {i: t for t, i in special_tokens.items()}
        self.eot_token = special_tokens["<|endoftext|>"]

    def __repr__(self):
        return f"<Encoding {self.name!r}>"

    @property
    def special_tokens_set(self):
        return set(self._special_tokens)

    def encode_ordinary(self, text):
        return list(text.encode("utf-8"))

    def encode(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        allowed = self.special_tokens_set if allowed_special == "all" else set(allowed_special)
        disallowed = self.special_tokens_set - allowed if disallowed_special == "all" else set(disallowed_special)
        for token in sorted(disallowed):
            if token in text:
                raise ValueError(
                    f"Encountered text corresponding to disallowed special token {token!r}.\n"
                    f"If you want this text to be encoded as a special token, pass it to `allowed_special`, e.g. "
                    f"`allowed_special={{{token!r}, ...}}`.")
        if not allowed:
            return self.encode_ordinary(text)
        pattern = "(" + "|".join(re.escape(t) for t in sorted(allowed, key=len, reverse=True)) + ")"
        out = []
        for i, piece in enumerate(re.split(pattern, text)):
            out += [self._special_tokens[piece]] if i % 2 else self.encode_ordinary(piece)
        return out

    def encode_batch(self, texts, *, allowed_special=frozenset(), disallowed_special="all", num_threads=8):
        return [self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special)
                for t in texts]

    def decode_single_token_bytes(self, token):
        token = int(token)
        if not 0 <= token < self.n_vocab:
            raise KeyError(f"Invalid token for decoding: {token}")
        if token < 256:
            return bytes([token])
        if token in self._special_by_id:
            return self._special_by_id[token].encode("utf-8")
        return f"[{token}]".encode("ascii")

    def decode_tokens_bytes(self, tokens):
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_bytes(self, tokens):
        return b"".join(self.decode_tokens_bytes(tokens))

    def decode(self, tokens, errors="replace"):
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)


def list_encoding_names():
    return list(_ENCODINGS)


def get_encoding(encoding_name):
    if encoding_name not in _ENCODINGS:
        raise ValueError(f"Unknown encoding {encoding_name}.\nPlugins found: []")
    n_vocab, special = _ENCODINGS[encoding_name]
    return Encoding(encoding_name, n_vocab, special)


def encoding_name_for_model(model_name):
    if model_name not in _MODELS:
        raise KeyError(f"Could not automatically map {model_name} to a tokeniser. Please use `tiktoken.get_encoding` "
                       "to explicitly get the tokeniser you expect.")
    return _MODELS[model_name]


def encoding_for_model(model_name):
    return get_encoding(encoding_name_for_model(model_name))
