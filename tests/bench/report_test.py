#!/usr/bin/env python3
"""accel-bench report renders a chart per figure, with data, in a browser.

Saves three runs (three commits) of four synthetic figures into a database,
writes the report page, and checks that it is self-contained (no external
script, style or image) and embeds dygraphs; then renders it in headless
Chromium: the page's DOM after its script ran must say that every figure got
a chart drawn (data-charts) carrying every run's point (data-points), and a
screenshot must be neither blank nor chart-less: enough non-white pixels,
and pixels of the series colour (#1f5fa8). Skipped (exit 77) when Chromium
is not installed.

usage: report_test.py ACCEL_BENCH
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SERIES_RGB = (0x1f, 0x5f, 0xa8)


def figure(name, ratio, target="<= 1.5", baseline="base"):
    samples = [ratio * (1 + 0.01 * k) for k in range(-5, 6)]
    return {"name": name, "value": ratio, "unit": "us",
            "baseline_name": baseline, "baseline": 1.0 if baseline else None,
            "ratio": ratio if baseline else None,
            "ci_low": min(samples), "ci_high": max(samples),
            "pairs": 11, "method": "paired" if baseline else "sampled",
            "target": target, "verdict": "met", "met": True, "runs": 11,
            "samples": samples}


def results(commit, when, k):
    run = {"commit": commit, "build_type": "release", "cpu_model": "test",
           "cores": 2, "governor": None, "load_before": None,
           "load_after": [0, 0, 0], "host": "test", "time": when, "env": {}}
    figs = [figure("roundtrip", 1.1 + 0.1 * k),
            figure("bandwidth", 0.9 + 0.05 * k, target=">= 0.95"),
            figure("no_target", 2.0 - 0.2 * k, target=None),
            figure("value_only", 40 + k, target="< 100", baseline=None)]
    return {"format": "accel-bench-results/1", "run": run,
            "benches": [{"bench": "synthetic", "device": "host:0",
                         "run": run, "results": figs}]}


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = \
                struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        db, page = f"{tmp}/h.db", f"{tmp}/report.html"
        paths = []
        for k in range(3):
            path = f"{tmp}/r{k}.json"
            with open(path, "w") as f:
                json.dump(results(f"{k + 1:x}" * 40,
                                  f"2026-11-2{k}T10:00:00Z", k), f)
            paths.append(path)
        subprocess.run([exe, "save", "--db", db, *paths], check=True,
                       stderr=subprocess.DEVNULL)
        subprocess.run([exe, "report", "--db", db, "--out", page], check=True)
        html = open(page).read()
        assert "Dygraph" in html, "dygraphs is not embedded"
        assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html), \
            "the page loads something from outside"
        browser = chromium()
        if browser is None:
            print("skipped: Chromium is not installed (Debian: chromium)")
            sys.exit(77)
        flags = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
                 "--hide-scrollbars", "--window-size=960,1000",
                 "--virtual-time-budget=3000",
                 f"--user-data-dir={tmp}/profile"]
        dom = subprocess.run(flags + ["--dump-dom", f"file://{page}"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, timeout=120).stdout
        body = re.search(r"<body([^>]*)>", dom)
        assert body, "no <body> in the rendered DOM"
        attrs = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
        print(f"rendered: {attrs}")
        assert attrs.get("figures") == "4", attrs
        assert attrs.get("charts") == "4", f"charts drawn: {attrs}"
        assert attrs.get("points") == "12", f"points: {attrs}"
        shot = f"{tmp}/shot.png"
        subprocess.run(flags + [f"--screenshot={shot}", f"file://{page}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120, check=True)
        width, height, rows = png_pixels(shot)
        pixels = [p for row in rows for p in row]
        ink = sum(1 for p in pixels if min(p) < 200)
        series = sum(1 for p in pixels
                     if all(abs(p[i] - SERIES_RGB[i]) < 40 for i in range(3)))
        print(f"screenshot {width}x{height}: {ink} non-white pixels, "
              f"{series} of the series colour")
        assert ink > 0.01 * len(pixels), "the screenshot is blank"
        assert series > 200, "no chart line in the screenshot"


if __name__ == "__main__":
    main()
