#!/usr/bin/env python3
"""llama.cpp's side of `accel-bench llm` (bench/llm_bench.c).

usage: llamacpp_driver.py MODEL THREADS PROMPT GENERATE SEED

Loads MODEL with llama-cpp-python (CPU, THREADS threads for prefill and
decode), then, as accel-bench llm measures accel at batch 1: a prompt of
PROMPT random token ids (from SEED), evaluated in one batch, and the first
token sampled greedily (prefill: PROMPT tokens over that time); then
GENERATE - 1 single-token decode steps, each greedy (decode: GENERATE - 1
tokens over their time). Prints one JSON object:
{"prefill_tok_s": X, "decode_tok_s": Y, "load_s": Z}. The model's load is
timed apart and is not in either figure.
"""
import json
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama


def last_token(llm):
    """Greedy pick from the logits of the last evaluated position."""
    p = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return int(np.argmax(np.ctypeslib.as_array(p, shape=(llm.n_vocab(),))))


def main():
    model, threads, prompt, generate, seed = sys.argv[1:6]
    threads, prompt, generate = int(threads), int(prompt), int(generate)
    t0 = time.perf_counter()
    try:
        llm = Llama(model_path=model, n_ctx=prompt + generate + 16,
                    n_batch=prompt, n_ubatch=prompt, n_threads=threads,
                    n_threads_batch=threads, verbose=False)
    except ValueError as e:
        # llama.cpp needs tokenizer.ggml.model (a vocabulary, or "none").
        print(json.dumps({"error": f"llama.cpp cannot load the file ({e}); "
                          "it needs tokenizer.ggml.model, \"none\" will do"}))
        return
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(int(seed))
    tokens = rng.integers(0, llm.n_vocab(), prompt).tolist()
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(tokens)
    tok = last_token(llm)
    t1 = time.perf_counter()
    for _ in range(generate - 1):
        llm.eval([tok])
        tok = last_token(llm)
    t2 = time.perf_counter()
    print(json.dumps({"prefill_tok_s": prompt / (t1 - t0),
                      "decode_tok_s": (generate - 1) / (t2 - t1)
                      if generate > 1 else 0.0,
                      "load_s": load_s}))


if __name__ == "__main__":
    main()
