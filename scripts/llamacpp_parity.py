#!/usr/bin/env python3
"""accel against llama.cpp (scripts/llamacpp-parity.sh runs this with the
python of scripts/llamacpp.sh's venv, which has llama_cpp, gguf, numpy).

usage: llamacpp_parity.py BUILD_DIR WORK_DIR

1. Logits: small random llama files (F32, F16, Q8_0, Q4_0 written with the
   `gguf` package, tests/model/gguf_run_test.py's writer and float64
   reference; Q4_K_M: an F32 one quantized by llama.cpp's own quantizer,
   the reference from its dequantized tensors); accel's (accel-run
   --logits) and llama.cpp's logits of every position against the float64
   evaluation: max |error|, top-1 agreement, median position error.
2. Tokenizers: the three real vocabularies (ggml-vocab-*.gguf, fetched by
   tests/model/fetch-vocab.sh into BUILD_DIR/tests/model/vocab-cache, or
   ACCEL_VOCAB_DIR) over varied
   texts: accel-run --tokenize against llama.cpp's tokenize (add_special on,
   parse_special off).
3. Speed: accel-bench llm on /tmp/bench-q8_0.gguf and /tmp/bench-q4_k.gguf
   (generated if absent: 12 layers, 1024 wide, 16/4 heads, ffn 2816,
   vocabulary 32000, random weights), each with a 32000-token dummy
   vocabulary added (llama.cpp needs one), which measures llama.cpp in the
   same run.
Prints a summary table.
"""
import json
import os
import subprocess
import sys

import numpy as np

BUILD, WORK = sys.argv[1:3]
HERE = os.path.dirname(os.path.abspath(__file__))
PACK = os.path.join(BUILD, "tools/accel-pack/accel-pack")
RUN = os.path.join(BUILD, "tools/accel-run/accel-run")
BENCH = os.path.join(BUILD, "tools/accel-bench/accel-bench")
KERNELS = os.path.join(BUILD, "kernels/axe/reference.axe")
os.makedirs(WORK, exist_ok=True)
sys.argv = [sys.argv[0], PACK, RUN, KERNELS, WORK]
sys.path.insert(0, os.path.join(HERE, "../tests/model"))
import gguf_run_test as g  # noqa: E402  (its writer and reference)
from gguf import GGMLQuantizationType as Q  # noqa: E402
from llama_cpp import Llama  # noqa: E402

ROWS = []
# The logits comparison: random models per type, prompt positions per model.
MODELS, POSITIONS = 16, 96
# The first model's seed (ACCEL_PARITY_SEED; the models are SEED .. SEED+15).
SEED = int(os.environ.get("ACCEL_PARITY_SEED", "300"))


def llama_logits(path, tokens):
    llm = Llama(model_path=path, n_ctx=128, n_batch=128, n_ubatch=128,
                logits_all=True, verbose=False)
    llm.eval(tokens)
    return np.array(llm.scores[:len(tokens)], dtype=np.float64)


def llama_quantize(src, dst, ftype):
    """|src| quantized to |dst| by llama.cpp's own quantizer (what
    llama-quantize runs), as users' K-quant files are made."""
    import ctypes
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    # Its per-tensor log goes to the C stderr: kept out of the tables.
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(),
                                            ctypes.byref(params))
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
    if rc != 0:
        raise RuntimeError("llama_model_quantize %s: %d" % (src, rc))


def dequantized(path):
    """Every tensor of |path| in float64, numpy shape (rows, columns)."""
    import gguf
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        a = np.asarray(t.data)
        if t.tensor_type not in (Q.F32, Q.F16):
            a = gguf.quants.dequantize(a, t.tensor_type)
        out[t.name] = a.astype(np.float64)
    return out


def write_case(path, qtype, seed, cfg):
    """A random model of |qtype| and its weights as the file holds them.
    Q4_K_M: an F32 model quantized by llama.cpp (LLAMA_FTYPE_MOSTLY_Q4_K_M:
    Q4_K, with Q6_K where llama.cpp puts it), so that the blocks' scales are
    the ones a real file has, fitted to the weights; random bytes (what
    tests/model does, gguf-py cannot quantize to K-quants) give random
    6-bit and int8 sub-block scales whose heavy-tailed activations made
    one position of 1,536 decide the max error."""
    if qtype != "Q4_K_M":
        return g.write_model(path, qtype, seed=seed, tied=False, cfg=cfg,
                             vocab=True)
    import llama_cpp
    src = path + ".f32"
    g.write_model(src, Q.F32, seed=seed, tied=False, cfg=cfg, vocab=True)
    llama_quantize(src, path, llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M)
    os.remove(src)
    return dequantized(path)


def logits_parity():
    rng = np.random.default_rng(5)
    # The vocabulary g.add_spm_vocab writes (llama.cpp needs one).
    small = dict(g.CONFIG, vocab=len(g.SPM_TOKENS))
    wide = dict(g.K_CONFIG, vocab=len(g.SPM_TOKENS))
    cases = [("F32", Q.F32, small), ("F16", Q.F16, small),
             ("Q8_0", Q.Q8_0, small), ("Q4_0", Q.Q4_0, small),
             ("Q4_K_M", "Q4_K_M", wide)]
    for name, qtype, cfg in cases:
        # MODELS random models of POSITIONS prompt positions each: one top-1
        # flip in a near tie is then 1/1536 of the figure (with 4 models,
        # 1/384, the two sides of one scheme traded places by chance).
        err = {"accel": 0.0, "llama.cpp": 0.0}
        hits = {"accel": 0, "llama.cpp": 0}
        # Each position's max error over the vocabulary: the median says how
        # far a typical position is off; the max is the one worst position
        # (where the model amplifies any rounding).
        per_pos = {"accel": [], "llama.cpp": []}
        for i in range(MODELS):
            path = os.path.join(WORK, "parity-%s-%d.gguf" % (name, i))
            w = write_case(path, qtype, SEED + i, cfg)
            tokens = [int(t) for t in rng.integers(3, cfg["vocab"],
                                                   POSITIONS)]
            want = g.reference(w, tokens, cfg)
            a = g.logits_of(path, tokens)
            b = llama_logits(path, tokens)
            for who, x in (("accel", a), ("llama.cpp", b)):
                err[who] = max(err[who], float(np.max(np.abs(x - want))))
                per_pos[who].extend(np.max(np.abs(x - want), axis=1).tolist())
                hits[who] += int(np.sum(x.argmax(1) == want.argmax(1)))
        row = {"type": name}
        for who in err:
            row[who + "_err"] = err[who]
            row[who + "_top1"] = hits[who] / float(MODELS * POSITIONS)
            row[who + "_median"] = float(np.median(per_pos[who]))
        ROWS.append(row)
    print("\n%d models x %d positions per type" % (MODELS, POSITIONS))
    print("\n| type | accel max err | llama.cpp max err | accel top-1 | "
          "llama.cpp top-1 | accel at least as accurate | accel median "
          "position err | llama.cpp median position err |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for r in ROWS:
        ok = (r["accel_err"] <= r["llama.cpp_err"] and
              r["accel_top1"] >= r["llama.cpp_top1"])
        print("| %s | %.2e | %.2e | %.3f | %.3f | %s | %.2e | %.2e |" % (
            r["type"], r["accel_err"], r["llama.cpp_err"], r["accel_top1"],
            r["llama.cpp_top1"], "yes" if ok else "NO", r["accel_median"],
            r["llama.cpp_median"]))


TEXTS = ["Hello world", " Hello world", "Hello World!", "  leading spaces",
         "trailing   ", "tabs\tand\nnewlines\n\n", "3333333 12345 1.5e-3",
         "def f(x):\n    return x ** 2  # square\n",
         "Grüße aus Köln, ça va? ¿Qué tal?", "Привет, мир", "你好，世界",
         "こんにちは世界", "안녕하세요", "مرحبا بالعالم", "🦙🚀 emoji 👍🏽",
         "<s> </s> <|endoftext|> <unk>", "don't can't I'm we'll",
         "a" * 300, "\u00a0non-breaking\u2009thin", ""]


def tokenizer_parity():
    vocab_dir = os.environ.get("ACCEL_VOCAB_DIR") or os.path.join(
        BUILD, "tests/model/vocab-cache")
    if not os.path.exists(os.path.join(vocab_dir, "ggml-vocab-qwen2.gguf")):
        # The same fetch the model tests use (llama-cpp-python's sdist).
        subprocess.run([os.path.join(HERE, "../tests/model/fetch-vocab.sh"),
                        vocab_dir], check=False)
    print("\n| vocabulary | texts | identical ids |")
    print("| --- | ---: | ---: |")
    for name in ("llama-spm", "llama-bpe", "qwen2"):
        path = os.path.join(vocab_dir, "ggml-vocab-%s.gguf" % name)
        if not os.path.exists(path):
            print("| %s | skipped: %s absent (tests/model/fetch-vocab.sh "
                  "could not fetch it) | |" % (name, path))
            continue
        llm = Llama(model_path=path, vocab_only=True, verbose=False)
        same = 0
        for text in TEXTS:
            ids = llm.tokenize(text.encode(), add_bos=True, special=False)
            got = subprocess.run([RUN, "--model", path, "--tokenize",
                                  "--prompt", text], capture_output=True,
                                 text=True)
            mine = json.loads(got.stdout) if got.returncode == 0 else None
            if mine == list(ids):
                same += 1
            else:
                print("  %s: %r: accel %s, llama.cpp %s" % (
                    name, text[:40], mine if mine is not None else
                    got.stderr.strip(), list(ids)))
        print("| %s | %d | %d |" % (name, len(TEXTS), same))


def with_vocab(src, dst):
    """A copy of |src| with a 32000-token dummy SentencePiece vocabulary
    (llama.cpp refuses a file without tokenizer.ggml.model)."""
    import gguf
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture" or \
                f.name.startswith("tokenizer.") or f.name == "general.alignment":
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.STRING:
            w.add_string(f.name, bytes(f.parts[-1]).decode())
        elif t != gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.parts[-1][0], t)
    n = int([t for t in r.tensors if t.name == "token_embd.weight"][0]
            .shape[1])
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    toks += ["\u2581t%d" % i for i in range(n - len(toks))]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * n)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (n - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_bench(path, qtype):
    cfg = dict(layers=12, dim=1024, heads=16, kv_heads=4, ffn=2816,
               vocab=32000, rope_base=10000.0, eps=1e-5)
    override = None
    if qtype == Q.Q4_K:
        override = {"blk.%d.ffn_down.weight" % l: Q.Q6_K for l in range(12)}
        override.update({"blk.%d.attn_v.weight" % l: Q.Q6_K
                         for l in range(12)})
        override["output.weight"] = Q.Q6_K
    g.write_model(path, qtype, seed=1, tied=False, cfg=cfg, override=override)


def speed():
    print("\n| file | figure | accel | llama.cpp | ratio [95%] | target | verdict |")
    print("| --- | --- | ---: | ---: | --- | --- | --- |")
    for base, qtype in (("/tmp/bench-q8_0.gguf", Q.Q8_0),
                        ("/tmp/bench-q4_k.gguf", Q.Q4_K)):
        if not os.path.exists(base):
            write_bench(base, qtype)
        path = os.path.join(WORK, os.path.basename(base).replace(
            ".gguf", "-vocab.gguf"))
        if not os.path.exists(path):
            with_vocab(base, path)
        quick = ["--quick"] if "--quick" in os.environ.get(
            "ACCEL_PARITY_FLAGS", "") else []
        got = subprocess.run([BENCH, "llm", "--model", path, "--json"] + quick,
                             capture_output=True, text=True)
        if got.returncode != 0:
            print("| %s | accel-bench failed: %s | | | | | |" % (
                base, got.stderr.strip()[-200:]))
            continue
        for r in json.loads(got.stdout)["results"]:
            print("| %s | %s | %.4g %s | %s | %s | %s | %s |" % (
                os.path.basename(base), r["name"], r["value"], r["unit"],
                "%.4g" % r["baseline"] if r.get("baseline") is not None
                else "-",
                "%.3g [%s, %s]" % (r["ratio"], r.get("ci_low"),
                                   r.get("ci_high"))
                if r.get("ratio") is not None else "-",
                r.get("target") or "-", r.get("verdict", "-")))


if __name__ == "__main__":
    if "--tokenizers-only" not in os.environ.get("ACCEL_PARITY_FLAGS", ""):
        logits_parity()
    tokenizer_parity()
    if "--no-speed" not in os.environ.get("ACCEL_PARITY_FLAGS", "") and \
            "--tokenizers-only" not in os.environ.get("ACCEL_PARITY_FLAGS", ""):
        speed()
