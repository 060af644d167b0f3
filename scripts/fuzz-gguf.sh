#!/bin/sh
# Builds the GGUF reader's libFuzzer target with clang (ASan + UBSan) and runs
# it for a bounded time from a few seed files it writes itself (a llama-like
# file with every metadata value type, string arrays and tensors of several
# block types, small SentencePiece and BPE vocabularies, from which the
# target also builds tokenizers, and whole small llama and qwen2 models that
# the target imports as decoders). Crashes are written to the build folder
# (crash-*): fix them and add the input to the seeds below.
#
#   scripts/fuzz-gguf.sh [--seconds N] [--build-dir DIR] [-- LIBFUZZER_ARGS]
#
# The meson test 'model/fuzz_gguf' (suite model-fuzz) runs it for 15 s; run it
# longer by hand, e.g. scripts/fuzz-gguf.sh --seconds 3600.
set -eu
root=${ACCEL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
fuzz_name=fuzz-gguf
. "$(dirname "$0")/fuzz-args.sh"
python3 - "$build/corpus" <<'PY'
import struct, sys, os
out = sys.argv[1]
def s(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b
def kv(key, t, payload):
    return s(key) + struct.pack('<I', t) + payload
def seed(name, kvs, tensors, alignment=32, version=3):
    head = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs))
    body = b''.join(kvs)
    infos = b''
    data = b''
    for tname, dims, ttype, nbytes in tensors:
        off = len(data)
        infos += s(tname) + struct.pack('<I', len(dims))
        infos += b''.join(struct.pack('<Q', d) for d in dims)
        infos += struct.pack('<IQ', ttype, off)
        data += bytes((i * 7) & 255 for i in range(nbytes))
        data += b'\0' * (-len(data) % alignment)
    blob = head + body + infos
    blob += b'\0' * (-len(blob) % alignment)
    with open(os.path.join(out, name), 'wb') as f:
        f.write(blob + data)
scalars = [kv('u8', 0, b'\x07'), kv('i8', 1, b'\xf9'), kv('u16', 2, b'\x01\x02'),
           kv('i16', 3, b'\xff\xff'), kv('u32', 4, struct.pack('<I', 9)),
           kv('i32', 5, struct.pack('<i', -9)), kv('f32', 6, struct.pack('<f', 1.5)),
           kv('b', 7, b'\x01'), kv('u64', 10, struct.pack('<Q', 1 << 40)),
           kv('i64', 11, struct.pack('<q', -5)), kv('f64', 12, struct.pack('<d', 2.5))]
vocab = kv('tokenizer.ggml.tokens', 9, struct.pack('<IQ', 8, 4) +
           s('<s>') + s('</s>') + s('\u2581the') + s('a'))
scores = kv('tokenizer.ggml.scores', 9, struct.pack('<IQ', 6, 4) +
            struct.pack('<4f', 0, 0, -1, -2))
arch = kv('general.architecture', 8, s('llama'))
seed('llama.gguf', [arch, vocab, scores] + scalars,
     [('token_embd.weight', [64, 4], 0, 1024), ('blk.0.attn_q.weight', [64, 2], 8, 136),
      ('blk.0.ffn_down.weight', [256, 1], 12, 144), ('output.weight', [256], 14, 210)])
seed('aligned.gguf', [kv('general.alignment', 4, struct.pack('<I', 64)), arch],
     [('a', [32], 2, 18), ('b', [8], 30, 16)], alignment=64, version=2)
seed('empty.gguf', [], [])
def strings(key, xs):
    return kv(key, 9, struct.pack('<IQ', 8, len(xs)) + b''.join(s(x) for x in xs))
def numbers(key, t, fmt, xs):
    return kv(key, 9, struct.pack('<IQ', t, len(xs)) + struct.pack('<%d%s' % (len(xs), fmt), *xs))
spm_tokens = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)] + \
    ['\u2581', 'a', 'b', '\u2581a', 'ab', '\u2581ab']
seed('spm.gguf', [kv('tokenizer.ggml.model', 8, s('llama')), strings('tokenizer.ggml.tokens', spm_tokens),
                  numbers('tokenizer.ggml.scores', 6, 'f', [float(-i) for i in range(len(spm_tokens))]),
                  numbers('tokenizer.ggml.token_type', 5, 'i', [2, 3, 3] + [6] * 256 + [1] * 6),
                  kv('tokenizer.ggml.add_eos_token', 7, b'\x01')], [])
bpe_tokens = [chr(c) for c in range(33, 127)] + ['\u0120', '\u0120a', 'ab', '<|x|>']
seed('bpe.gguf', [kv('tokenizer.ggml.model', 8, s('gpt2')), kv('tokenizer.ggml.pre', 8, s('qwen2')),
                  strings('tokenizer.ggml.tokens', bpe_tokens),
                  numbers('tokenizer.ggml.token_type', 5, 'i', [1] * (len(bpe_tokens) - 1) + [4]),
                  strings('tokenizer.ggml.merges', ['\u0120 a', 'a b'])], [])
# Whole decoder models the import takes (dim 32, 2 heads, 1 KV head, ffn
# 32, vocabulary 4, one layer): llama with Q8_0 and Q4_1 projections and a
# tied head, and qwen2 with its biases and an output head.
def u32(key, v):
    return kv(key, 4, struct.pack('<I', v))
def model(name, arch, biases, head):
    kvs = [kv('general.architecture', 8, s(arch)), u32(arch + '.block_count', 1),
           u32(arch + '.embedding_length', 32), u32(arch + '.feed_forward_length', 32),
           u32(arch + '.attention.head_count', 2), u32(arch + '.attention.head_count_kv', 1),
           kv(arch + '.rope.freq_base', 6, struct.pack('<f', 10000.0))]
    ts = [('token_embd.weight', [32, 4], 8, 4 * 34), ('output_norm.weight', [32], 0, 128)]
    if head:
        ts.append(('output.weight', [32, 4], 3, 4 * 20))
    for part, rows, t in [('attn_q', 32, 8), ('attn_k', 16, 3), ('attn_v', 16, 8),
                          ('attn_output', 32, 3), ('ffn_gate', 32, 8), ('ffn_up', 32, 3),
                          ('ffn_down', 32, 8)]:
        ts.append(('blk.0.%s.weight' % part, [32, rows], t, rows * (34 if t == 8 else 20)))
        if biases and part in ('attn_q', 'attn_k', 'attn_v'):
            ts.append(('blk.0.%s.bias' % part, [rows], 0, rows * 4))
    ts += [('blk.0.attn_norm.weight', [32], 0, 128), ('blk.0.ffn_norm.weight', [32], 0, 128)]
    seed(name, kvs, ts)
model('llama-model.gguf', 'llama', False, False)
model('qwen2-model.gguf', 'qwen2', True, True)
PY
"$root/fuzz/build-model-fuzzer.sh" "$root" "$build" fuzz_gguf
cd "$build"
exec ./fuzz_gguf -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=1024 -print_final_stats=1 "$@" corpus
