"""The runner the tools' Python checks share: every module-level function
named test_* runs in name order; each prints "ok   NAME" or "FAIL NAME:
why", and the script's exit status is 1 when any failed."""
import sys


def run(namespace):
    failed = 0
    for name, t in sorted(namespace.items()):
        if name.startswith("test_") and callable(t):
            try:
                t()
                print("ok   " + name)
            except AssertionError as e:
                failed += 1
                print("FAIL %s: %s" % (name, e))
    return 1 if failed else 0


def main(namespace):
    sys.exit(run(namespace))
