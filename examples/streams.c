// example-streams: the shape of a program that drives accel.
//
// Creates the runtime, allocates device buffers, uploads input, and runs a
// two-stage pipeline on two streams: stream A fills and scales data and
// signals a timeline semaphore; stream B waits on it, sums the result, and
// records events around its work. Prints what happened and how long it took.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/accel.h"

#define N (1u << 20)  // floats per buffer

#define CHECK(expr)                                                     \
  do {                                                                  \
    accel_status_t st_ = (expr);                                        \
    if (st_ != ACCEL_OK) {                                              \
      fprintf(stderr, "example-streams: %s failed: %s: %s\n", #expr,    \
              accel_status_name(st_), accel_last_error());              \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

typedef struct stage {
  accel_buffer_t *buffer;
  float scale;
  double sum;
} stage_t;

// Host work run by stream A: scales the device buffer in place (the host
// device's memory is host-visible).
static accel_status_t scale_fn(void *user_data) {
  stage_t *st = user_data;
  float *p = NULL;
  accel_status_t s = accel_buffer_host_pointer(st->buffer, (void **)&p);
  if (s != ACCEL_OK) {
    return s;
  }
  for (uint32_t i = 0; i < N; ++i) {
    p[i] *= st->scale;
  }
  return ACCEL_OK;
}

// Host work run by stream B once A's result is ready.
static accel_status_t sum_fn(void *user_data) {
  stage_t *st = user_data;
  float *p = NULL;
  accel_status_t s = accel_buffer_host_pointer(st->buffer, (void **)&p);
  if (s != ACCEL_OK) {
    return s;
  }
  double sum = 0;
  for (uint32_t i = 0; i < N; ++i) {
    sum += p[i];
  }
  st->sum = sum;
  return ACCEL_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(void) {
  double t_start = now_ms();
  accel_runtime_t *rt = NULL;
  CHECK(accel_runtime_create(NULL, &rt));
  accel_device_t *dev = NULL;
  CHECK(accel_device_get(rt, 0, &dev));
  accel_device_info_t info = {.struct_size = sizeof(info)};
  CHECK(accel_device_info(dev, &info));
  printf("device %s: %s\n", info.id, info.name);

  accel_buffer_desc_t desc = {.struct_size = sizeof(desc),
                              .size_bytes = N * sizeof(float),
                              .tag = "example"};
  accel_buffer_t *input = NULL, *work = NULL;
  CHECK(accel_buffer_alloc(dev, &desc, &input));
  CHECK(accel_buffer_alloc(dev, &desc, &work));

  float *host = malloc(N * sizeof(float));
  for (uint32_t i = 0; i < N; ++i) {
    host[i] = (float)(i % 100);
  }
  double expected = 0;
  for (uint32_t i = 0; i < N; ++i) {
    expected += host[i] * 0.5;
  }

  accel_stream_desc_t sa = {.struct_size = sizeof(sa), .name = "producer"};
  accel_stream_desc_t sb = {.struct_size = sizeof(sb), .name = "consumer"};
  accel_stream_t *a = NULL, *b = NULL;
  CHECK(accel_stream_create(dev, &sa, &a));
  CHECK(accel_stream_create(dev, &sb, &b));
  accel_semaphore_t *ready = NULL;
  CHECK(accel_semaphore_create(dev, 0, &ready));
  accel_event_t *begin = NULL, *end = NULL, *a_done = NULL;
  CHECK(accel_event_create(dev, 0, &begin));
  CHECK(accel_event_create(dev, 0, &end));
  CHECK(accel_event_create(dev, 0, &a_done));

  stage_t stage = {.buffer = work, .scale = 0.5f};
  // Stream A: upload, copy device-to-device, scale, signal.
  CHECK(accel_event_record(begin, a));
  CHECK(accel_stream_copy_from_host(a, input, 0, host, desc.size_bytes));
  CHECK(accel_stream_copy(a, work, 0, input, 0, desc.size_bytes));
  CHECK(accel_stream_host_call(a, scale_fn, &stage));
  CHECK(accel_stream_signal(a, ready, 1));
  CHECK(accel_event_record(a_done, a));
  // Stream B: wait for A through the semaphore, sum, then wait on A's event
  // again (a no-op by then) and record the end.
  CHECK(accel_stream_wait(b, ready, 1));
  CHECK(accel_stream_host_call(b, sum_fn, &stage));
  CHECK(accel_stream_wait_event(b, a_done));
  CHECK(accel_event_record(end, b));
  double t_enqueued = now_ms();
  CHECK(accel_stream_synchronize(b, 10ull * 1000 * 1000 * 1000));

  int64_t device_ns = 0, a_ns = 0;
  CHECK(accel_event_elapsed_ns(begin, end, &device_ns));
  CHECK(accel_event_elapsed_ns(begin, a_done, &a_ns));
  printf("stream producer: upload %u floats, copy, scale by %.1f, signal "
         "semaphore -> %.3f ms\n",
         N, stage.scale, a_ns / 1e6);
  printf("stream consumer: waited on the semaphore, summed -> %.1f "
         "(expected %.1f) %s\n",
         stage.sum, expected, stage.sum == expected ? "ok" : "MISMATCH");
  printf("device time begin->end: %.3f ms; host: enqueue %.3f ms, total "
         "%.3f ms\n",
         device_ns / 1e6, t_enqueued - t_start, now_ms() - t_start);

  // Readback check through a device-to-host copy.
  float first = -1;
  CHECK(accel_stream_copy_to_host(b, &first, work, 4 * sizeof(float),
                                  sizeof(float)));
  CHECK(accel_stream_synchronize(b, ACCEL_TIMEOUT_INFINITE));
  printf("readback work[4] = %.1f (expected 2.0)\n", first);

  int ok = stage.sum == expected && first == 2.0f;
  accel_event_release(begin);
  accel_event_release(end);
  accel_event_release(a_done);
  accel_semaphore_release(ready);
  accel_stream_destroy(a);
  accel_stream_destroy(b);
  accel_buffer_release(input);
  accel_buffer_release(work);
  accel_runtime_destroy(rt);
  free(host);
  printf("%s\n", ok ? "example-streams: OK" : "example-streams: FAILED");
  return ok ? 0 : 1;
}
