#!/bin/sh
# The main job on the embedded default (the host device): installs what is
# missing, builds, lists the devices, and runs the example program. Each
# step says what it does first; a failing build shows its output and stops
# the script with exit 1.
set -eu
cd "$(dirname "$0")/.."
echo "== checking build dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
echo "== building the release flavour into build/ (meson and ninja; a first build takes a minute)"
dir=$(scripts/build.sh release --progress) || exit 1
echo
echo "== accel-info"
"$dir/tools/accel-info/accel-info"
echo
echo "== accel-topo"
"$dir/tools/accel-topo/accel-topo"
echo
echo "== example-streams"
"$dir/examples/example-streams"
if [ -x "$dir/examples/example-mlp-layer" ]; then
  echo
  echo "== example-mlp-layer: pack, load and run a transformer MLP block (traced)"
  axe="$dir/mlp_layer.axe"
  trace="$dir/mlp_layer.pftrace"
  ACCEL_TRACE="$trace" "$dir/examples/example-mlp-layer" \
    "$dir/kernels/host/libaccel_kernels.so" "$axe"
  echo
  echo "== accel-inspect $axe"
  "$dir/tools/accel-inspect/accel-inspect" "$axe"
  echo
  echo "== accel-trace summary $trace (open the file in the Perfetto UI)"
  "$dir/tools/accel-trace/accel-trace" summary "$trace"
fi
if [ -x "$dir/examples/example-decoder" ]; then
  echo
  echo "== example-decoder: a 4-layer int8 transformer on reference.axe: prefill 256 tokens, decode 64"
  echo "   (on the serving engine: paged KV cache, decode steps replayed from a recorded"
  echo "   command buffer; time per kernel and host overhead from the recorder's traces)"
  "$dir/examples/example-decoder" "$dir/kernels/axe/reference.axe" \
    --model "$dir/decoder.axe" --trace-dir "$dir" --prompt 256 --steps 64
  echo
  echo "== accel-inspect $dir/kernels/axe/reference.axe (every reference kernel)"
  "$dir/tools/accel-inspect/accel-inspect" "$dir/kernels/axe/reference.axe" |
    sed -n '/^kernels/,/^weights/p' | grep -v '^    binding'
fi
if [ -x "$dir/tools/accel-serve/accel-serve" ] && [ -f "$dir/decoder.axe" ]; then
  echo
  echo "== accel-serve: the decoder over HTTP; one streamed completion (8 tokens), then stop"
  log="$dir/accel-serve.log"
  "$dir/tools/accel-serve/accel-serve" --model "$dir/decoder.axe" \
    --kernels "$dir/kernels/axe/reference.axe" --port 0 >"$log" 2>&1 &
  pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  head -1 "$log"
  python3 - "$port" <<'PY'
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
c.request("POST", "/v1/completions", body=json.dumps(
    {"prompt": [1, 2, 3, 4], "max_tokens": 8, "temperature": 0.8, "seed": 7,
     "stream": True}), headers={"Content-Type": "application/json"})
tokens = []
for line in c.getresponse():
    line = line.decode().strip()
    if line == "data: [DONE]":
        break
    if line.startswith("data: "):
        tokens += json.loads(line[6:])["choices"][0]["tokens"]
        print("  streamed token", tokens[-1], flush=True)
print("  completion of [1, 2, 3, 4]:", tokens)
PY
  kill "$pid"
  wait "$pid" || true
fi
