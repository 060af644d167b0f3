#!/usr/bin/env python3
"""The layer check (scripts/check-layers.py): it passes on the tree, and it
fails, naming the arrow, on copies of lib/ with a back-arrow planted by
include and by call."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
CHECK = os.path.join(SRC, 'scripts', 'check-layers.py')


def run(root):
    p = subprocess.run([sys.executable, CHECK, '--root', root],
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def planted(append_to, text):
    tmp = tempfile.mkdtemp(prefix='accel-layers-')
    shutil.copytree(os.path.join(SRC, 'lib'), os.path.join(tmp, 'lib'))
    with open(os.path.join(tmp, 'lib', append_to), 'a') as f:
        f.write(text)
    return tmp


def expect(cond, what):
    if not cond:
        print('FAIL: ' + what)
        sys.exit(1)
    print('ok: ' + what)


# The tree as it is follows the order.
rc, out = run(SRC)
expect(rc == 0, 'the tree passes the layer check (%s)' % out.strip())

# An include up the order is named with its file, header and modules.
tmp = planted('mem/pool.c', '\n#include "stream/stream_impl.h"\n')
rc, out = run(tmp)
shutil.rmtree(tmp)
expect(rc == 1 and 'lib/mem/pool.c -> stream/stream_impl.h: mem may not use '
       'stream' in out, 'a planted include of stream in mem is named')

# A call up the order is named with the function and its module.
tmp = planted('core/env.c', '\nvoid accel_env_probe(void);\n'
              'void accel_env_probe(void) { accel_buffer_release(0); }\n')
rc, out = run(tmp)
shutil.rmtree(tmp)
expect(rc == 1 and 'lib/core/env.c calls accel_buffer_release (mem): core '
       'may not use mem' in out, 'a planted call from core into mem is named')

# A backend sees core and the trace hooks only.
tmp = planted('drv/host/host_fence.c', '\n#include "mem/buffer_impl.h"\n')
rc, out = run(tmp)
shutil.rmtree(tmp)
expect(rc == 1 and 'drv/host may not use mem' in out,
       'a backend including lib/mem is named')
# The tracer takes plain numbers, not the driver's commands.
tmp = planted('trace/hooks.c', '\n#include "core/driver_queue.h"\n')
rc, out = run(tmp)
shutil.rmtree(tmp)
expect(rc == 1 and 'lib/trace/hooks.c -> core/driver_queue.h: trace may not '
       'use the driver interface' in out,
       'the tracer including a driver header is named')
# A _locked function that does not assert its lock is named.
tmp = planted('mem/stats.c', '\nstatic int probe_locked(int x);\n'
              'static int probe_locked(int x) { return x + 1; }\n')
rc, out = run(tmp)
shutil.rmtree(tmp)
expect(rc == 1 and 'lib/mem/stats.c: probe_locked does not assert its lock'
       in out, 'a _locked function without ACCEL_ASSERT_HELD is named')
print('6 passed, 0 failed')
