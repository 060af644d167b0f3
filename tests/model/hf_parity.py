#!/usr/bin/env python3
"""The tokenizers against the reference libraries on random text.

usage: hf_parity.py LIBACCEL VOCAB_DIR TEXTS [SEED]

llama.cpp's reference ids (.gguf.out) come from the models' own tokenizers;
this rebuilds them from each real vocabulary: for the BPE ones a Hugging
Face `tokenizers` tokenizer from the file's tokens, merges and user-defined
tokens with the pre-tokenizer's original regular expression (Split +
ByteLevel); for llama-spm a `sentencepiece` BPE model (byte fallback,
dummy prefix, no normalization) from the file's pieces, scores and types.
Their ids are compared with accel's (called through ctypes on libaccel.so)
on TEXTS random multilingual texts per vocabulary (seeded; the seed is
printed) and on the .gguf.inp texts. Exits 77 when `tokenizers`,
`sentencepiece` or `gguf` cannot be imported.
"""
import ctypes
import os
import random
import sys
import time
import types

try:
    import gguf
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as sp_pb
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers
except ImportError as e:
    print("hf_parity: %s; skipping" % e)
    sys.exit(77)

LIB, VOCAB, COUNT = sys.argv[1], sys.argv[2], int(sys.argv[3])
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else int(time.time())

REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|%s"
         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
# vocabulary, digit rule, whole-word lookup (llama.cpp's ignore_merges);
# no digit rule: SentencePiece
CASES = [("llama-spm", None, None), ("llama-bpe", "\\p{N}{1,3}", True),
         ("qwen2", "\\p{N}", False)]

PIECES = ["Hello", " world", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " ",
          "日本語のテキスト", "Привет, мир", "مرحبا بالعالم", "שלום", "नमस्ते",
          "😀", "👨‍👩‍👧‍👦", "🇺🇸", "e\u0301", "ß", "ǅ", "123456789", "3.14",
          "'s", "'LL", "'Re", "don't", "I'm", "WE'LL", "x'd", "    ",
          "for (int i = 0; i < n; ++i) {", "    return x->y;", "}", "<s>",
          "</s>", "<|im_start|>", "<|endoftext|>", "[PAD151650]", "!!!",
          "...", "ＡＢＣ", "①②", "\u200b", "\u00a0", "\u3000", "ℕ", "ﬁ", "Ⅻ",
          "١٢٣", "\u2028", "\u0085", " \n ", "a\u0300b"]
PLANES = [0x20, 0xa0, 0x370, 0x400, 0x600, 0x660, 0x900, 0x2000, 0x2070,
          0x3040, 0x4e00, 0xac00, 0x1f300, 0x1f900, 0x20000]


def random_text(rng):
    parts = []
    for _ in range(rng.randint(1, 20)):
        if rng.random() < 0.3:
            parts.append(chr(rng.choice(PLANES) + rng.randint(0, 0x5f)))
        else:
            parts.append(rng.choice(PIECES))
    return "".join(parts)


def field_strings(reader, key):
    f = reader.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def hf_tokenizer(path, digits, ignore_merges):
    r = gguf.GGUFReader(path)
    tokens = field_strings(r, "tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field_strings(r, "tokenizer.ggml.merges")]
    tt = r.fields["tokenizer.ggml.token_type"]
    types = [int(tt.parts[i][0]) for i in tt.data]
    vocab = {t: i for i, t in enumerate(tokens)}  # a later duplicate wins
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges,
                               ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(REGEX % digits), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                    for i, ty in enumerate(types) if ty == 4])
    return tok


class SentencePiece:
    """llama-spm as sentencepiece itself runs it."""

    def __init__(self, path):
        r = gguf.GGUFReader(path)
        tokens = field_strings(r, "tokenizer.ggml.tokens")
        f = r.fields["tokenizer.ggml.scores"]
        scores = [float(f.parts[i][0]) for i in f.data]
        f = r.fields["tokenizer.ggml.token_type"]
        kinds = [int(f.parts[i][0]) for i in f.data]
        m = sp_pb.ModelProto()
        m.trainer_spec.model_type = sp_pb.TrainerSpec.BPE
        m.trainer_spec.byte_fallback = True
        m.trainer_spec.vocab_size = len(tokens)
        m.trainer_spec.unk_id, m.trainer_spec.bos_id = 0, 1
        m.trainer_spec.eos_id, m.trainer_spec.pad_id = 2, -1
        m.normalizer_spec.name = "identity"
        m.normalizer_spec.add_dummy_prefix = True
        m.normalizer_spec.remove_extra_whitespaces = False
        m.normalizer_spec.escape_whitespaces = True
        for text, score, ty in zip(tokens, scores, kinds):
            p = m.pieces.add()
            p.piece, p.score, p.type = text, score, ty  # the same numbering
        self.sp = sentencepiece.SentencePieceProcessor(
            model_proto=m.SerializeToString())

    def encode(self, text, add_special_tokens=False):
        # the shape of a tokenizers Encoding, for the comparison loop
        return types.SimpleNamespace(ids=self.sp.encode(text))


class Accel:
    def __init__(self, lib, path):
        self.lib = ctypes.CDLL(lib)
        self.lib.accel_last_error.restype = ctypes.c_char_p
        self.gguf = ctypes.c_void_p()
        self.tok = ctypes.c_void_p()
        for call, args in [("accel_gguf_open_file", (path.encode(), ctypes.byref(self.gguf))),
                           ("accel_tokenizer_create_from_gguf", (self.gguf, ctypes.byref(self.tok)))]:
            if getattr(self.lib, call)(*args) != 0:
                raise RuntimeError("%s: %s" % (call, self.lib.accel_last_error().decode()))

    def encode(self, text):
        data = text.encode("utf-8")
        count = ctypes.c_size_t()
        ids = (ctypes.c_int32 * (len(data) + 8))()
        st = self.lib.accel_tokenizer_encode(self.tok, data, ctypes.c_size_t(len(data)), 0,
                                             ids, ctypes.c_size_t(len(data) + 8),
                                             ctypes.byref(count))
        if st != 0:
            raise RuntimeError(self.lib.accel_last_error().decode())
        return list(ids[:count.value])


def main():
    print("hf_parity: seed %d (replay with the seed as the last argument)" % SEED)
    failures = 0
    for name, digits, ignore in CASES:
        path = os.path.join(VOCAB, "ggml-vocab-%s.gguf" % name)
        hf = (SentencePiece(path) if digits is None
              else hf_tokenizer(path, digits, ignore))
        ours = Accel(LIB, path)
        rng = random.Random(SEED)
        with open(path + ".inp", encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
        texts += [random_text(rng) for _ in range(COUNT)]
        bad = 0
        for text in texts:
            want = hf.encode(text, add_special_tokens=False).ids
            got = ours.encode(text)
            if want != got:
                bad += 1
                if bad <= 3:
                    print("%s %r:\n  reference %s\n  accel     %s" % (name, text, want, got))
        print("%s: %d texts, %d differ from %s" % (
            name, len(texts), bad,
            "sentencepiece" if digits is None else "tokenizers"))
        failures += bad
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
