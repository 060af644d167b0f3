#!/bin/sh
# Runs a command with every thread of it on one CPU (the first this process
# may use), as on an oversubscribed machine: workers, copy engines and the
# threads that feed them then share that CPU, and every handoff between them
# needs the scheduler (the yields of the host driver's spins; see
# docs/execution-model.md). Used with ACCEL_AFFINITY=0, which stops the host
# driver from binding its threads to the node's cores.
set -eu
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
exec taskset -c "$cpu" "$@"
