// accel-bench kernels: the reference kernels through accel_launch on the
// host device against baselines measured in the same run (issue #17). Each
// family adds its figures (attention_bench.c: paged vs dense decode), and
// decoder_bench.c runs examples/decoder.c's model end to end.
#include <stdio.h>

#include "accel/accel.h"
#include "bench.h"

int accel_bench_kernels(const bench_args_t *args) {
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  if (accel_runtime_create(NULL, &rt) != ACCEL_OK ||
      accel_device_get(rt, 0, &dev) != ACCEL_OK) {
    fprintf(stderr, "accel-bench kernels: %s\n", accel_last_error());
    accel_runtime_destroy(rt);
    return 1;
  }
  bench_report_t report;
  bench_report_init(&report, "kernels", dev);
  int rc = bench_kernels_attention(&report, rt, dev, args->quick) ||
           bench_kernels_decoder(&report, rt, args->quick);
  if (rc == 0) {
    rc = bench_print(&report, args->json);
  }
  accel_runtime_destroy(rt);
  return rc;
}
