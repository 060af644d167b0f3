#!/usr/bin/env python3
"""accel-run --tokenize against the reference ids of the real vocabularies.

usage: accel_run_test.py ACCEL_RUN FETCH_SCRIPT VOCAB_DIR

For each vocabulary (fetched by tests/model/fetch-vocab.sh; exit 77 with the
reason when it cannot be), the first texts of llama.cpp's .gguf.inp file go
through accel-run --model ... --tokenize --prompt TEXT, whose JSON array
must be the .gguf.out ids with BOS in front where the file adds it; and the
usage errors exit 2 naming what is missing.
"""
import json
import os
import subprocess
import sys

RUN, FETCH, VOCAB = sys.argv[1:4]
# (vocabulary, BOS added for a prompt)
CASES = [("llama-spm", 1), ("llama-bpe", 128000), ("qwen2", None)]


def main():
    rc = subprocess.run([FETCH, VOCAB]).returncode
    if rc != 0:
        print("accel_run_test: vocabularies unavailable (fetch exited %d); "
              "skipping" % rc)
        return 77
    failures = 0
    for name, bos in CASES:
        base = os.path.join(VOCAB, "ggml-vocab-%s.gguf" % name)
        with open(base + ".inp", "rb") as f:
            texts = f.read().split(b"\n__ggml_vocab_test__\n")[:-1]
        with open(base + ".out", encoding="utf-8") as f:
            outs = f.read().split("\n")
        checked = 0
        for text, out in zip(texts, outs):
            if not text or b"\0" in text:
                continue  # an argument cannot be empty-checked or hold NUL
            want = ([bos] if bos is not None else []) + [int(x) for x in out.split()]
            got = subprocess.run([RUN, "--model", base, "--tokenize",
                                  "--prompt", text], capture_output=True)
            if got.returncode != 0 or json.loads(got.stdout) != want:
                print("%s %r: want %s, got rc %d %s %s" % (
                    name, text, want, got.returncode, got.stdout.decode(),
                    got.stderr.decode()))
                failures += 1
            checked += 1
            if checked == 12:
                break
        print("%s: %d prompts as the reference" % (name, checked))
    base = os.path.join(VOCAB, "ggml-vocab-qwen2.gguf")
    for args, needle in [([], "--model"), (["--model", base], "--tokenize"),
                         (["--model", base, "--tokenize"], "--prompt")]:
        got = subprocess.run([RUN] + args, capture_output=True, text=True)
        if got.returncode != 2 or needle not in got.stderr:
            print("usage %s: rc %d, %r" % (args, got.returncode, got.stderr))
            failures += 1
    got = subprocess.run([RUN, "--model", VOCAB, "--tokenize", "--prompt", "x"],
                         capture_output=True, text=True)
    if got.returncode != 1 or "accel-run" not in got.stderr:
        print("a folder as model: rc %d, %r" % (got.returncode, got.stderr))
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
