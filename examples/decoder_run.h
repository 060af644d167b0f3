// The decoder of examples/decoder.c as code to call: pack its model with
// seeded random weights, and run it on reference.axe through the serving
// engine (prefill a prompt of seeded random tokens in one step, then decode
// greedily a step per token), each phase recorded with the built-in
// recorder so that the run reports where its time went. Used by
// example-decoder, accel-bench kernels (bench/decoder_bench.c) and serve,
// and the engine's tests (which pack its model).
// Failures of accel calls are printed and exit the program.
#ifndef ACCEL_EXAMPLES_DECODER_RUN_H_
#define ACCEL_EXAMPLES_DECODER_RUN_H_

#include <stdint.h>

#include "accel/accel.h"
#include "decoder_model.h"
#include "trace_summary.h"

// Packs the model |c| describes, with its seeded random weights and its
// configuration as metadata, into the .axe file |path|.
void decoder_pack(const decoder_config_t *c, const char *path);

// What to run.
typedef struct decoder_run_desc {
  decoder_config_t c;
  uint32_t prompt;  // prompt tokens (>= 1)
  uint32_t steps;   // tokens to generate (>= 1; the first from the prefill)
  const char *reference_path;  // reference.axe
  const char *model_path;      // the model .axe decoder_pack wrote
  const char *trace_dir;       // where decoder-{prefill,decode}.pftrace go
} decoder_run_desc_t;

// One phase of a run.
typedef struct decoder_phase {
  uint32_t tokens;    // prefill: prompt tokens; decode: tokens decoded
  uint64_t launches;  // kernel launches of the phase (its trace's kernel
                      // slices)
  double wall_s;      // first enqueue to completion
  double kernel_s;    // time inside kernels, from the phase's trace
  trace_summary_t trace;  // the phase's trace, one row per slice name
} decoder_phase_t;

typedef struct decoder_result {
  decoder_phase_t prefill, decode;
  int32_t *tokens;  // prompt, then generated: int32 [prompt + steps]
  float *logits;    // each generated token's logits: f32 [steps, vocab]
} decoder_result_t;

// Runs |d| on device 0 of |rt| into |*out| (free with decoder_result_free).
// The recorder must be free (ACCEL_TRACE unset): each phase starts it.
void decoder_run(accel_runtime_t *rt, const decoder_run_desc_t *d,
                 decoder_result_t *out);

void decoder_result_free(decoder_result_t *r);

#endif  // ACCEL_EXAMPLES_DECODER_RUN_H_
