// The model runner under the serving engine (docs/serving.md, "The model
// format" and "The engine"): a decoder model .axe and reference.axe loaded on
// one device, the paged KV cache as device buffers, and one batched forward
// pass over a step's entries. engine.c owns requests and scheduling; this
// file owns the bytes and the launches.
#ifndef ACCEL_SERVE_SERVE_MODEL_H_
#define ACCEL_SERVE_SERVE_MODEL_H_

#include <stdbool.h>
#include <stdint.h>

#include "accel/executable.h"
#include "accel/memory.h"
#include "accel/scheduler.h"
#include "accel/stream.h"

// X(field): the configuration, metadata "decoder.<field>" (decimal uint32).
#define SERVE_MODEL_CONFIG_FIELDS(X) \
  X(layers) X(dim) X(heads) X(kv_heads) X(head_dim) X(ffn) X(vocab) \
  X(block_size)

typedef struct serve_model_config {
#define SERVE_MODEL_FIELD(name) uint32_t name;
  SERVE_MODEL_CONFIG_FIELDS(SERVE_MODEL_FIELD)
#undef SERVE_MODEL_FIELD
} serve_model_config_t;

typedef struct serve_model serve_model_t;

typedef struct serve_model_desc {
  const char *model_path, *kernels_path;
  uint64_t kv_bytes, swap_bytes;
  uint32_t max_step_tokens, max_step_seqs, max_context;
  // Replay a recorded command buffer per step shape (docs/serving.md, "Step
  // command buffers"); false: every step launch by launch.
  bool command_buffers;
  // Block projections keep f32 activations (ACCEL_SERVE_F32_ACTIVATIONS).
  bool f32_activations;
} serve_model_desc_t;

// What the runner did so far.
typedef struct serve_model_counters {
  uint64_t steps_direct;    // steps submitted launch by launch
  uint64_t steps_recorded;  // steps recorded into a buffer, then executed
  uint64_t steps_replayed;  // steps that replayed a recorded buffer
  uint64_t issue_ns;        // CPU time of the stepping thread issuing the
                            // steps' commands (from staging to the last
                            // submit, not the wait)
  uint32_t command_buffers;  // recorded buffers cached now (<= 32)
} serve_model_counters_t;

// Loads the model and kernels and allocates the cache and the activations.
// Errors as accel_serve_engine_create.
accel_status_t serve_model_create(accel_device_t *device,
                                  const serve_model_desc_t *desc,
                                  serve_model_t **out);
void serve_model_destroy(serve_model_t *m);

const serve_model_config_t *serve_model_config(const serve_model_t *m);
uint32_t serve_model_device_blocks(const serve_model_t *m);
uint32_t serve_model_host_blocks(const serve_model_t *m);
// Bytes of one block over every layer's K and V.
uint64_t serve_model_block_bytes(const serve_model_t *m);

// Runs |plan| (its copies, then the model over its entries) and writes the
// logits of each sampling entry, in plan order, to |logits| ([samples,
// vocab]); waits for the device. Device errors as accel_launch and
// accel_stream_synchronize.
accel_status_t serve_model_run(serve_model_t *m, const accel_sched_plan_t *plan,
                               float *logits);

// After serve_model_run failed with |failure|: replaces the failed stream
// with a new one, so that later steps run. ACCEL_ERROR_DEVICE_LOST when
// |failure| is that or the device is lost (the runner cannot go on);
// stream creation errors.
accel_status_t serve_model_recover(serve_model_t *m, accel_status_t failure);

// Copies the runner's counters to |*out|.
void serve_model_counters(const serve_model_t *m, serve_model_counters_t *out);

#endif  // ACCEL_SERVE_SERVE_MODEL_H_
