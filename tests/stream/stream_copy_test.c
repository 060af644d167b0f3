// DMA work ordered with stream work through timeline semaphores, and the
// stream copy path through a DMA queue (stream_copy.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dma/dma_impl.h"
#include "stream/stream_copy.h"
#include "stream/stream_impl.h"
#include "fault_driver.h"
#include "test_support.h"

#define SECOND 1000000000ull

static accel_buffer_t *alloc(test_env_t *env, uint64_t size, uint8_t **out) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  *out = p;
  return b;
}

typedef struct check {
  const uint8_t *data;
  uint64_t size;
  uint8_t expect;
  int bad;  // set by the host call when a byte differs
} check_t;

static accel_status_t check_bytes(void *arg) {
  check_t *c = arg;
  for (uint64_t i = 0; i < c->size; ++i) {
    if (c->data[i] != c->expect) {
      c->bad = 1;
      break;
    }
  }
  return ACCEL_OK;
}

// stream fill A -> signal; dma waits, copies A->B, signals; the stream waits
// and checks B, then fills A again: every round sees its own value, with no
// host synchronization between the rounds.
static void test_dma_orders_with_stream_work_through_semaphores(void **state) {
  test_env_t *env = *state;
  uint64_t size = 3u << 20;
  uint8_t *ap, *bp;
  accel_buffer_t *a = alloc(env, size, &ap);
  accel_buffer_t *b = alloc(env, size, &bp);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_dma_queue_t *q = NULL;
  assert_accel_ok(accel_dma_queue_create(env->device, NULL, &q));
  accel_semaphore_t *to_dma = NULL, *to_stream = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &to_dma));
  assert_accel_ok(accel_semaphore_create(env->device, 0, &to_stream));
  enum { ROUNDS = 16 };
  check_t checks[ROUNDS];
  for (uint64_t r = 1; r <= ROUNDS; ++r) {
    assert_accel_ok(accel_stream_fill(s, a, 0, size, r, 1));
    assert_accel_ok(accel_stream_signal(s, to_dma, r));
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_1D,
                          .dst = {.buffer = b},
                          .src = {.buffer = a},
                          .width_bytes = size};
    assert_accel_ok(accel_dma_submit(q, &d, 1, 1, &to_dma, &r, 1, &to_stream,
                                     &r));
    assert_accel_ok(accel_stream_wait(s, to_stream, r));
    checks[r - 1] = (check_t){.data = bp, .size = size, .expect = (uint8_t)r};
    assert_accel_ok(accel_stream_host_call(s, check_bytes, &checks[r - 1]));
  }
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  for (int r = 0; r < ROUNDS; ++r) {
    assert_int_equal(checks[r].bad, 0);
  }
  accel_dma_queue_destroy(q);
  accel_stream_destroy(s);
  accel_semaphore_release(to_dma);
  accel_semaphore_release(to_stream);
  accel_buffer_release(a);
  accel_buffer_release(b);
}

// Copies routed from a stream through its DMA link run in the stream's
// order: fill, copy (device and pageable host), check, in a loop.
static void test_dma_stream_copy_runs_in_stream_order(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t size = 1u << 20;
  uint8_t *ap, *bp;
  accel_buffer_t *a = alloc(env, size, &ap);
  accel_buffer_t *b = alloc(env, size, &bp);
  uint8_t *host = malloc(size);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_stream_copy_link_t *_Atomic link = NULL;
  enum { ROUNDS = 10 };
  check_t checks[ROUNDS];
  for (int r = 0; r < ROUNDS; ++r) {
    uint64_t n = test_rng_range(&rng, 1, size);
    uint8_t v = (uint8_t)(r + 1);
    assert_accel_ok(accel_stream_fill(s, a, 0, size, v, 1));
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_1D,
                          .dst = {.buffer = b},
                          .src = {.buffer = a},
                          .width_bytes = n};
    assert_accel_ok(accel_stream_copy_submit(s, &link, &d));
    d.dst = (accel_dma_ref_t){.host = host};
    d.src = (accel_dma_ref_t){.buffer = b};
    assert_accel_ok(accel_stream_copy_submit(s, &link, &d));
    checks[r] = (check_t){.data = host, .size = n, .expect = v};
    assert_accel_ok(accel_stream_host_call(s, check_bytes, &checks[r]));
  }
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  for (int r = 0; r < ROUNDS; ++r) {
    assert_int_equal(checks[r].bad, 0);
  }
  // A copy the stream rejects (validated once, by the stream, before it
  // reaches the DMA queue) fails the call, not the stream.
  assert_accel_status(accel_stream_copy(s, b, 0, a, 0, size + 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  accel_stream_destroy(s);
  accel_stream_copy_link_destroy(link);
  free(host);
  accel_buffer_release(a);
  accel_buffer_release(b);
}

// An engine error on the link's queue fails the stream, and the stream's
// error names the DMA descriptor.
static void test_dma_stream_copy_engine_error_fails_stream(void **state) {
  test_env_t *env = *state;
  uint8_t *ap, *bp;
  accel_buffer_t *a = alloc(env, 4096, &ap);
  accel_buffer_t *b = alloc(env, 4096, &bp);
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  accel_stream_copy_link_t *_Atomic link = NULL;
  accel_dma_desc_t d = {.struct_size = sizeof(d),
                        .op = ACCEL_DMA_OP_COPY_1D,
                        .dst = {.buffer = b},
                        .src = {.buffer = a},
                        .width_bytes = 4096};
  assert_accel_ok(accel_stream_copy_submit(s, &link, &d));  // creates the link
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  assert_accel_ok(fault_dma_queue_inject(accel_stream_copy_link_queue(link), 0,
                                               ACCEL_ERROR_DEVICE_LOST));
  // The engine may fail the copy, and so the stream, before the call's last
  // step (the stream's release of the queue's references) is enqueued: the
  // call then reports the stream's error.
  accel_status_t st = accel_stream_copy_submit(s, &link, &d);
  assert_true(st == ACCEL_OK || st == ACCEL_ERROR_DEVICE_LOST);
  assert_accel_status(accel_stream_synchronize(s, 10 * SECOND),
                      ACCEL_ERROR_DEVICE_LOST);
  assert_non_null(strstr(accel_last_error(), "descriptor 0 (copy)"));
  accel_stream_destroy(s);
  accel_stream_copy_link_destroy(link);
  accel_buffer_release(a);
  accel_buffer_release(b);
}

// The public stream copies run on the stream's DMA queue: its counters move
// the bytes of each direction (a reference sum over random sizes and
// offsets), the data matches a reference copy, an empty copy enqueues
// nothing and creates no DMA queue, and an overlapping copy within one
// buffer runs on the stream itself with memmove semantics.
static void test_stream_copies_run_on_dma_queue(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  const uint64_t size = 1 << 20;
  uint8_t *ap, *bp;
  accel_buffer_t *a = alloc(env, size, &ap);
  accel_buffer_t *b = alloc(env, size, &bp);
  uint8_t *host = malloc(size), *back = malloc(size), *ref = malloc(size);
  assert_non_null(host);
  assert_non_null(back);
  assert_non_null(ref);
  for (uint64_t i = 0; i < size; ++i) {
    host[i] = (uint8_t)test_rng_next(&rng);
  }
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  // Empty copies and an overlapping one: no DMA queue yet.
  assert_accel_ok(accel_stream_copy(s, b, 0, a, 0, 0));
  assert_accel_ok(accel_stream_copy_from_host(s, a, 0, host, 0));
  assert_accel_ok(accel_stream_copy_to_host(s, back, a, 0, 0));
  assert_accel_ok(accel_stream_copy(s, a, 1, a, 0, 100));
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  assert_null(atomic_load(&s->dma_link));
  assert_accel_ok(accel_stream_copy_from_host(s, a, 0, host, size));
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  assert_non_null(atomic_load(&s->dma_link));
  accel_dma_queue_t *q = accel_stream_copy_link_queue(atomic_load(&s->dma_link));
  memcpy(ref, host, size);
  uint64_t h2d = size, d2h = 0, d2d = 0;
  for (int i = 0; i < 40; ++i) {
    uint64_t n = test_rng_range(&rng, 1, size / 4);
    uint64_t x = test_rng_range(&rng, 0, size - n);
    uint64_t y = test_rng_range(&rng, 0, size - n);
    switch (test_rng_range(&rng, 0, 3)) {
      case 0:
        assert_accel_ok(accel_stream_copy_from_host(s, a, x, host + y, n));
        memcpy(ref + x, host + y, n);
        h2d += n;
        break;
      case 1:
        assert_accel_ok(accel_stream_copy(s, b, x, a, y, n));
        assert_accel_ok(accel_stream_copy(s, a, y, b, x, n));  // a unchanged
        d2d += 2 * n;
        break;
      case 2:  // within a, possibly overlapping: memmove on the stream
        assert_accel_ok(accel_stream_copy(s, a, x, a, y, n));
        memmove(ref + x, ref + y, n);
        if (!(x < y + n && y < x + n)) {
          d2d += n;  // apart: through DMA
        }
        break;
      default:
        assert_accel_ok(accel_stream_copy_to_host(s, back, a, x, n));
        d2h += n;
        assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
        assert_memory_equal(back, ref + x, n);
        break;
    }
  }
  assert_accel_ok(accel_stream_copy_to_host(s, back, a, 0, size));
  d2h += size;
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  assert_memory_equal(back, ref, size);
  accel_dma_queue_counters_t c = {.struct_size = sizeof(c)};
  assert_accel_ok(accel_dma_queue_counters(q, &c));
  assert_int_equal(c.bytes_host_to_device, h2d);
  assert_int_equal(c.bytes_device_to_host, d2h);
  assert_int_equal(c.bytes_device_to_device, d2d);
  accel_stream_destroy(s);
  free(host);
  free(back);
  free(ref);
  accel_buffer_release(a);
  accel_buffer_release(b);
}

// A stream created with ACCEL_STREAM_FLAG_ABORT_ON_DESTROY and destroyed with
// copies pending behind a wait that never ends: the copies are aborted, the
// buffers (released by the caller before) are freed with the stream, and
// nothing leaks (ASan) or races (TSan).
static void test_stream_copies_aborted_on_destroy(void **state) {
  test_env_t *env = *state;
  uint8_t *ap, *bp;
  accel_buffer_t *a = alloc(env, 1 << 16, &ap);
  accel_buffer_t *b = alloc(env, 1 << 16, &bp);
  memset(ap, 5, 1 << 16);
  memset(bp, 0, 1 << 16);
  accel_semaphore_t *never = NULL;
  assert_accel_ok(accel_semaphore_create(env->device, 0, &never));
  accel_stream_desc_t sd = {.struct_size = sizeof(sd),
                            .flags = ACCEL_STREAM_FLAG_ABORT_ON_DESTROY};
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, &sd, &s));
  assert_accel_ok(accel_stream_copy(s, b, 0, a, 0, 1 << 16));  // runs
  assert_accel_ok(accel_stream_synchronize(s, 10 * SECOND));
  assert_accel_ok(accel_stream_wait(s, never, 1));
  uint8_t host[256];
  assert_accel_ok(accel_stream_copy(s, b, 0, a, 0, 1 << 16));
  assert_accel_ok(accel_stream_copy_to_host(s, host, a, 0, sizeof(host)));
  accel_buffer_release(a);
  accel_buffer_release(b);
  accel_stream_destroy(s);
  accel_semaphore_release(never);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dma_orders_with_stream_work_through_semaphores),
      cmocka_unit_test(test_dma_stream_copy_runs_in_stream_order),
      cmocka_unit_test(test_dma_stream_copy_engine_error_fails_stream),
      cmocka_unit_test(test_stream_copies_run_on_dma_queue),
      cmocka_unit_test(test_stream_copies_aborted_on_destroy),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
