#!/usr/bin/env python3
"""accel-serve with real HTTP clients on loopback (docs/serving.md, "The HTTP
server").

usage: server_test.py ACCEL_SERVE EXAMPLE_DECODER REFERENCE_AXE

Packs a small decoder with example-decoder, starts accel-serve on a free
port, and checks: the GET endpoints; concurrent streaming requests give
the tokens the same requests give one at a time (same seed, same tokens
whatever the concurrency); a client that disconnects mid-stream has its
blocks freed (seen in /metrics); malformed JSON, unknown fields, absurd
max_tokens, negative temperature and other bad requests each get a 4xx
with a message while the server keeps serving; SIGTERM stops it cleanly.
Each check is a function named as a sentence; the seed is printed.
"""
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SERVE, DECODER, REFERENCE = sys.argv[1:4]
VOCAB = 300
PORT = None


def conn():
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)


def request(method, path, body=None, raw=None):
    c = conn()
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data,
              headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    payload = r.read()
    c.close()
    return r.status, r.getheader("Content-Type", ""), payload


def complete(body):
    status, _, payload = request("POST", "/v1/completions", body)
    assert status == 200, (status, payload)
    return json.loads(payload)


def stream(body):
    """The tokens of a streamed completion, and its finish reason."""
    c = conn()
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.status
    assert r.getheader("Content-Type") == "text/event-stream"
    tokens, reason, done = [], None, False
    for line in r:
        line = line.decode().strip()
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[6:]
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        choice = chunk["choices"][0]
        tokens += choice["tokens"]
        reason = choice["finish_reason"] or reason
    c.close()
    assert done, "no [DONE]"
    return tokens, reason


def metrics():
    status, ctype, payload = request("GET", "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    out = {}
    for line in payload.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_get_endpoints_answer():
    # /health, /v1/models and /metrics answer with what they document.
    status, _, payload = request("GET", "/health")
    assert status == 200 and json.loads(payload)["status"] == "ok"
    status, _, payload = request("GET", "/v1/models")
    models = json.loads(payload)
    assert status == 200 and models["data"][0]["id"] == "decoder"
    assert models["data"][0]["vocab"] == VOCAB
    m = metrics()
    for name in ["accel_serve_kv_blocks_used", "accel_serve_requests_waiting",
                 "accel_serve_kv_waste_ratio", "accel_serve_ttft_seconds_count",
                 'accel_serve_tpot_seconds_bucket{le="+Inf"}']:
        assert name in m, name


def test_completion_answers_with_tokens_and_usage():
    # A non-streamed completion gives max_tokens tokens and the usage.
    r = complete({"prompt": [5, 6, 7, 8], "max_tokens": 7, "temperature": 0})
    choice = r["choices"][0]
    assert len(choice["tokens"]) == 7 and choice["finish_reason"] == "length"
    assert all(0 <= t < VOCAB for t in choice["tokens"])
    assert r["usage"] == {"prompt_tokens": 4, "completion_tokens": 7,
                          "total_tokens": 11}
    # A text prompt is byte-level tokenized: "AB" is [65, 66].
    a = complete({"prompt": "AB", "max_tokens": 3, "temperature": 0})
    b = complete({"prompt": [65, 66], "max_tokens": 3, "temperature": 0})
    assert a["choices"][0]["tokens"] == b["choices"][0]["tokens"]


def test_concurrent_streams_give_the_tokens_of_sequential_runs(rng):
    # Same seed, same tokens whatever else runs: 12 streamed requests at once
    # against the same requests streamed one by one.
    bodies = []
    for i in range(12):
        prompt = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 60))]
        bodies.append({"prompt": prompt, "max_tokens": rng.randint(1, 40),
                       "temperature": rng.choice([0, 0.7, 1.0]),
                       "top_p": rng.choice([1.0, 0.9]),
                       "top_k": rng.choice([0, 20]),
                       "seed": rng.randrange(1 << 40)})
    alone = [stream(b) for b in bodies]
    results = [None] * len(bodies)

    def run(i):
        results[i] = stream(bodies[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, b in enumerate(bodies):
        assert results[i] == alone[i], (i, results[i], alone[i])
        assert len(alone[i][0]) == b["max_tokens"] and alone[i][1] == "length"
    # Non-streamed gives the same tokens too.
    assert complete(bodies[0])["choices"][0]["tokens"] == alone[0][0]


def wait_metric(name, pred, what):
    deadline = time.time() + 20
    while time.time() < deadline:
        m = metrics()
        if pred(m[name]):
            return m
        time.sleep(0.05)
    raise AssertionError("%s: %s stayed at %s" % (what, name, m[name]))


def test_client_disconnect_mid_stream_frees_its_blocks():
    # A client that reads one event and closes its socket: the request is
    # cancelled and its KV blocks are returned (kv_blocks_used back to 0).
    before = metrics()
    s = socket.create_connection(("127.0.0.1", PORT))
    body = json.dumps({"prompt": list(range(100)), "max_tokens": 3000,
                       "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(body) + body)
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        assert chunk, "the server closed first"
        got += chunk
    m = metrics()
    assert m["accel_serve_kv_blocks_used"] > 0, m["accel_serve_kv_blocks_used"]
    s.close()
    wait_metric("accel_serve_requests_cancelled_total",
                lambda v: v >= before["accel_serve_requests_cancelled_total"] + 1,
                "cancelled after the disconnect")
    m = wait_metric("accel_serve_kv_blocks_used", lambda v: v == 0,
                    "blocks after the disconnect")
    assert m["accel_serve_requests_live"] == 0
    assert m["accel_serve_generated_tokens_total"] < (
        before["accel_serve_generated_tokens_total"] + 3000)


BAD = [
    ("malformed JSON", 400, '{"prompt": [1, 2', "malformed JSON"),
    ("trailing garbage", 400, '{"prompt": [1]} x', "malformed JSON"),
    ("not an object", 400, '[1, 2]', "JSON object"),
    ("unknown field", 400, '{"prompt": [1], "frobnicate": 1}', "unknown field"),
    ("absurd max_tokens", 400, '{"prompt": [1], "max_tokens": 1000000000}',
     "max_tokens"),
    ("max_tokens beyond the context", 400,
     '{"prompt": [1, 2, 3], "max_tokens": 4094}', "context limit"),
    ("negative temperature", 400, '{"prompt": [1], "temperature": -0.5}',
     "temperature"),
    ("top_p zero", 400, '{"prompt": [1], "top_p": 0}', "top_p"),
    ("token outside the vocabulary", 400, '{"prompt": [1, 300]}', "prompt[1]"),
    ("negative token", 400, '{"prompt": [-1]}', "prompt[0]"),
    ("fractional token", 400, '{"prompt": [1.5]}', "prompt[0]"),
    ("empty prompt", 400, '{"prompt": []}', "prompt"),
    ("missing prompt", 400, '{"max_tokens": 3}', "prompt"),
    ("stream not a boolean", 400, '{"prompt": [1], "stream": "yes"}', "stream"),
    ("seed negative", 400, '{"prompt": [1], "seed": -3}', "seed"),
    ("unknown model", 404, '{"prompt": [1], "model": "gpt-9"}', "not served"),
    ("empty body", 400, '', "malformed JSON"),
]


def test_bad_requests_get_4xx_with_a_message_and_the_server_keeps_serving():
    for what, code, raw, needle in BAD:
        status, ctype, payload = request("POST", "/v1/completions", raw=raw)
        assert status == code, (what, status, payload)
        err = json.loads(payload)["error"]
        assert needle in err["message"], (what, err)
        assert err["code"] == code
    status, _, payload = request("POST", "/v1/completions",
                                 raw='{"prompt": [' + "1," * 600000 + '1]}')
    assert status == 413, (status, payload[:200])
    status, _, _ = request("GET", "/v1/completions")
    assert status == 405
    status, _, payload = request("GET", "/v1/nothing")
    assert status == 404 and b"no endpoint" in payload
    # Still serving, and nothing was left behind.
    r = complete({"prompt": [3, 1, 4], "max_tokens": 2})
    assert len(r["choices"][0]["tokens"]) == 2
    m = metrics()
    assert m["accel_serve_kv_blocks_used"] == 0
    assert m["accel_serve_http_errors_total"] >= len(BAD) + 3


def main():
    global PORT
    seed = int(os.environ.get("ACCEL_TEST_SEED", time.time_ns() % (1 << 40)))
    print("seed %d (replay with ACCEL_TEST_SEED=%d)" % (seed, seed))
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.axe")
        subprocess.run([DECODER, REFERENCE, "--model", model, "--prompt", "2",
                        "--steps", "1", "--trace-dir", tmp, "--layers", "2",
                        "--dim", "64", "--heads", "4", "--kv-heads", "2",
                        "--head-dim", "16", "--ffn", "128", "--vocab",
                        str(VOCAB), "--block-size", "8"],
                       check=True, capture_output=True)
        server = subprocess.Popen(
            [SERVE, "--model", model, "--kernels", REFERENCE, "--port", "0",
             "--max-context", "4096", "--max-step-tokens", "64",
             "--kv-bytes", str(4096 * 1200)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline()
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            assert match, (line, server.stderr.read() if server.poll() else "")
            PORT = int(match.group(1))
            failed = 0
            for name, fn in sorted(globals().items()):
                if not name.startswith("test_"):
                    continue
                try:
                    fn(rng) if fn.__code__.co_argcount else fn()
                    print("ok   %s" % name)
                except Exception as e:  # report every check, then fail
                    failed += 1
                    print("FAIL %s: %r" % (name, e))
            server.send_signal(signal.SIGTERM)
            rc = server.wait(timeout=30)
            if rc != 0:
                failed += 1
                print("FAIL accel-serve exited %d: %s" % (rc, server.stderr.read()))
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
