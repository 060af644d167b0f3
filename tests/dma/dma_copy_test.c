// Every DMA copy kind against a reference computed with plain loops, on
// random sizes, offsets and pitches (unaligned and tiny ones included), from
// device buffers, pinned host buffers and pageable host memory; and the
// validation of descriptors.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct fixture {
  test_env_t *env;
  accel_dma_queue_t *queue;
  accel_semaphore_t *sem;
  uint64_t sem_value;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  void *env = NULL;
  if (f == NULL || test_env_setup(&env) != 0) {
    free(f);
    return -1;
  }
  f->env = env;
  if (accel_dma_queue_create(f->env->device, NULL, &f->queue) != ACCEL_OK ||
      accel_semaphore_create(f->env->device, 0, &f->sem) != ACCEL_OK) {
    fprintf(stderr, "setup: %s\n", accel_last_error());
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  accel_dma_queue_destroy(f->queue);
  accel_semaphore_release(f->sem);
  void *env = f->env;
  test_env_teardown(&env);
  free(f);
  return 0;
}

static accel_buffer_t *alloc(fixture_t *f, uint64_t size, uint32_t kind,
                             uint8_t **out_ptr) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d),
                           .kind = kind,
                           .size_bytes = size};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(f->env->device, &d, &b));
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  *out_ptr = p;
  return b;
}

static void randomize(test_rng_t *rng, uint8_t *p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (uint8_t)test_rng_next(rng);
  }
}

// Submits |n| descriptors, signals the fixture semaphore and waits for it.
static void run(fixture_t *f, const accel_dma_desc_t *d, uint32_t n) {
  uint64_t v = ++f->sem_value;
  assert_accel_ok(
      accel_dma_submit(f->queue, d, n, 0, NULL, NULL, 1, &f->sem, &v));
  assert_accel_ok(accel_semaphore_wait(f->sem, v, 10ull * 1000000000ull));
}

// Endpoint kinds for random choice.
enum { SIDE_DEVICE, SIDE_PINNED, SIDE_PAGEABLE };

typedef struct side {
  accel_buffer_t *buffer;
  uint8_t *ptr;  // host view of the memory
  uint64_t size;
  int kind;
} side_t;

static side_t make_side(fixture_t *f, int kind, uint64_t size) {
  side_t s = {.size = size, .kind = kind};
  if (kind == SIDE_PAGEABLE) {
    s.ptr = malloc(size);
    assert_non_null(s.ptr);
  } else {
    s.buffer = alloc(f, size,
                     kind == SIDE_PINNED ? ACCEL_MEMORY_KIND_HOST_PINNED
                                         : ACCEL_MEMORY_KIND_DEVICE,
                     &s.ptr);
  }
  return s;
}

static void free_side(side_t *s) {
  if (s->buffer != NULL) {
    accel_buffer_release(s->buffer);
  } else {
    free(s->ptr);
  }
}

static accel_dma_ref_t ref_of(const side_t *s, uint64_t offset) {
  accel_dma_ref_t r = {.offset = offset};
  if (s->buffer != NULL) {
    r.buffer = s->buffer;
  } else {
    r.host = s->ptr;
  }
  return r;
}

// Picks two endpoint kinds that are not both pageable.
static void pick_kinds(test_rng_t *rng, int *dst, int *src) {
  do {
    *dst = (int)test_rng_range(rng, 0, 2);
    *src = (int)test_rng_range(rng, 0, 2);
  } while (*dst == SIDE_PAGEABLE && *src == SIDE_PAGEABLE);
}

// Random 1D sizes: mostly small and odd, sometimes several staging chunks or
// large enough to be split over the engines.
static uint64_t random_size(test_rng_t *rng) {
  switch (test_rng_range(rng, 0, 5)) {
    case 0:
      return test_rng_range(rng, 1, 16);
    case 1:
      return test_rng_range(rng, 17, 4096);
    case 2:
      return test_rng_range(rng, 4097, 300000);
    case 3:
      return test_rng_range(rng, 300001, 1200000);
    default:
      return test_rng_range(rng, 2u << 20, 5u << 20);
  }
}

// 1D copies between every pair of endpoint kinds match memcpy.
static void test_dma_copy_1d_matches_reference(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int iter = 0; iter < 40; ++iter) {
    uint64_t size = random_size(&rng);
    uint64_t doff = test_rng_range(&rng, 0, 100);
    uint64_t soff = test_rng_range(&rng, 0, 100);
    int dk, sk;
    pick_kinds(&rng, &dk, &sk);
    side_t dst = make_side(f, dk, size + doff + 64);
    side_t src = make_side(f, sk, size + soff + 64);
    randomize(&rng, src.ptr, src.size);
    randomize(&rng, dst.ptr, dst.size);
    uint8_t *expect = malloc(dst.size);
    memcpy(expect, dst.ptr, dst.size);
    for (uint64_t i = 0; i < size; ++i) {
      expect[doff + i] = src.ptr[soff + i];
    }
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_1D,
                          .dst = ref_of(&dst, doff),
                          .src = ref_of(&src, soff),
                          .width_bytes = size};
    run(f, &d, 1);
    if (memcmp(expect, dst.ptr, dst.size) != 0) {
      fail_msg("iteration %d: 1d copy of %llu bytes (%d <- %d) differs", iter,
               (unsigned long long)size, dk, sk);
    }
    free(expect);
    free_side(&dst);
    free_side(&src);
  }
}

// Reference strided copy.
static void ref_copy_3d(uint8_t *dst, const uint8_t *src, uint64_t w,
                        uint64_t h, uint64_t dpt, uint64_t dp, uint64_t sp,
                        uint64_t dsp, uint64_t ssp) {
  for (uint64_t z = 0; z < dpt; ++z) {
    for (uint64_t y = 0; y < h; ++y) {
      for (uint64_t x = 0; x < w; ++x) {
        dst[z * dsp + y * dp + x] = src[z * ssp + y * sp + x];
      }
    }
  }
}

// 2D and 3D copies with random pitches match the loop reference.
static void test_dma_copy_2d_3d_match_reference(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int iter = 0; iter < 40; ++iter) {
    bool three = iter % 2 == 1;
    uint64_t w = test_rng_range(&rng, 1, iter % 5 == 0 ? 300000 : 700);
    uint64_t h = test_rng_range(&rng, 1, w > 1000 ? 4 : 40);
    uint64_t dpt = three ? test_rng_range(&rng, 1, 6) : 1;
    uint64_t dp = w + test_rng_range(&rng, 0, 33);
    uint64_t sp = w + test_rng_range(&rng, 0, 33);
    uint64_t dsp = three ? dp * h + test_rng_range(&rng, 0, 50) : 0;
    uint64_t ssp = three ? sp * h + test_rng_range(&rng, 0, 50) : 0;
    uint64_t doff = test_rng_range(&rng, 0, 9);
    uint64_t soff = test_rng_range(&rng, 0, 9);
    uint64_t dsize = doff + (three ? dsp * dpt : dp * h) + 16;
    uint64_t ssize = soff + (three ? ssp * dpt : sp * h) + 16;
    int dk, sk;
    pick_kinds(&rng, &dk, &sk);
    side_t dst = make_side(f, dk, dsize);
    side_t src = make_side(f, sk, ssize);
    randomize(&rng, src.ptr, ssize);
    randomize(&rng, dst.ptr, dsize);
    uint8_t *expect = malloc(dsize);
    memcpy(expect, dst.ptr, dsize);
    ref_copy_3d(expect + doff, src.ptr + soff, w, h, dpt, dp, sp, dsp, ssp);
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = three ? ACCEL_DMA_OP_COPY_3D
                                      : ACCEL_DMA_OP_COPY_2D,
                          .dst = ref_of(&dst, doff),
                          .src = ref_of(&src, soff),
                          .width_bytes = w,
                          .height = h,
                          .depth = dpt,
                          .dst_pitch = dp,
                          .src_pitch = sp,
                          .dst_slice_pitch = dsp,
                          .src_slice_pitch = ssp};
    run(f, &d, 1);
    if (memcmp(expect, dst.ptr, dsize) != 0) {
      fail_msg("iteration %d: %s copy %llux%llux%llu (%d <- %d) differs",
               iter, three ? "3d" : "2d", (unsigned long long)w,
               (unsigned long long)h, (unsigned long long)dpt, dk, sk);
    }
    free(expect);
    free_side(&dst);
    free_side(&src);
  }
}

// 2D and 3D copies large enough to be split over the engines (by rows, by
// slices) match the reference.
static void test_dma_large_2d_3d_copies_split_over_engines(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  struct {
    uint64_t w, h, d;
  } shapes[] = {{4096 + 13, 600, 1}, {1000, 300, 9}, {3u << 20, 1, 1}};
  for (int i = 0; i < 3; ++i) {
    uint64_t w = shapes[i].w, h = shapes[i].h, dpt = shapes[i].d;
    uint64_t dp = w + 7, sp = w + 3;
    uint64_t dsp = dp * h + 5, ssp = sp * h + 1;
    uint64_t dsize = dsp * dpt + 64, ssize = ssp * dpt + 64;
    side_t dst = make_side(f, SIDE_DEVICE, dsize);
    side_t src = make_side(f, SIDE_PINNED, ssize);
    randomize(&rng, src.ptr, ssize);
    randomize(&rng, dst.ptr, dsize);
    uint8_t *expect = malloc(dsize);
    memcpy(expect, dst.ptr, dsize);
    ref_copy_3d(expect + 1, src.ptr + 2, w, h, dpt, dp, sp, dsp, ssp);
    accel_dma_queue_counters_t before = {.struct_size = sizeof(before)};
    assert_accel_ok(accel_dma_queue_counters(f->queue, &before));
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_3D,
                          .dst = ref_of(&dst, 1),
                          .src = ref_of(&src, 2),
                          .width_bytes = w,
                          .height = h,
                          .depth = dpt,
                          .dst_pitch = dp,
                          .src_pitch = sp,
                          .dst_slice_pitch = dsp,
                          .src_slice_pitch = ssp};
    run(f, &d, 1);
    assert_memory_equal(expect, dst.ptr, dsize);
    accel_dma_queue_counters_t after = {.struct_size = sizeof(after)};
    assert_accel_ok(accel_dma_queue_counters(f->queue, &after));
    if (after.engine_count > 1) {
      // Pieces, forks and joins: more ring descriptors than the copy and
      // the signal.
      assert_true(after.ring_descriptors - before.ring_descriptors > 2);
    }
    free(expect);
    free_side(&dst);
    free_side(&src);
  }
}

// Scatter-gather lists match per-segment memcpy, in list order.
static void test_dma_copy_sg_matches_reference(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  for (int iter = 0; iter < 20; ++iter) {
    uint64_t size = 1u << 20;
    int dk, sk;
    pick_kinds(&rng, &dk, &sk);
    side_t dst = make_side(f, dk, size);
    side_t src = make_side(f, sk, size);
    randomize(&rng, src.ptr, size);
    randomize(&rng, dst.ptr, size);
    uint8_t *expect = malloc(size);
    memcpy(expect, dst.ptr, size);
    uint32_t n = (uint32_t)test_rng_range(&rng, 1, 40);
    accel_dma_segment_t seg[40];
    for (uint32_t s = 0; s < n; ++s) {
      uint64_t len = test_rng_range(&rng, 0, s % 7 == 0 ? 200000 : 300);
      seg[s].size_bytes = len;
      seg[s].dst_offset = test_rng_range(&rng, 0, size - 16 - len);
      seg[s].src_offset = test_rng_range(&rng, 0, size - 16 - len);
      memcpy(expect + 3 + seg[s].dst_offset, src.ptr + 5 + seg[s].src_offset,
             len);
    }
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_SG,
                          .dst = ref_of(&dst, 3),
                          .src = ref_of(&src, 5),
                          .segment_count = n,
                          .segments = seg};
    run(f, &d, 1);
    if (memcmp(expect, dst.ptr, size) != 0) {
      fail_msg("iteration %d: sg copy of %u segments (%d <- %d) differs", iter,
               n, dk, sk);
    }
    free(expect);
    free_side(&dst);
    free_side(&src);
  }
}

// Fills with 1/2/4/8-byte patterns, small and split over the engines.
static void test_dma_fill_matches_reference(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t cap = 6u << 20;
  uint8_t *ptr = NULL;
  accel_buffer_t *buf = alloc(f, cap, ACCEL_MEMORY_KIND_DEVICE, &ptr);
  uint8_t *expect = malloc(cap);
  for (int iter = 0; iter < 40; ++iter) {
    uint32_t ps = 1u << test_rng_range(&rng, 0, 3);
    uint64_t size = (iter % 4 == 3 ? test_rng_range(&rng, 2u << 20, 5u << 20)
                                   : test_rng_range(&rng, 0, 5000)) /
                    ps * ps;
    uint64_t off = test_rng_range(&rng, 0, 64) / ps * ps;
    uint64_t pattern = test_rng_next(&rng);
    if (ps < 8) {
      pattern &= (1ull << (8 * ps)) - 1;
    }
    randomize(&rng, ptr, cap);
    memcpy(expect, ptr, cap);
    for (uint64_t i = 0; i < size; ++i) {
      expect[off + i] = (uint8_t)(pattern >> (8 * (i % ps)));
    }
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_FILL,
                          .dst = {.buffer = buf, .offset = off},
                          .width_bytes = size,
                          .pattern = pattern,
                          .pattern_size = ps};
    run(f, &d, 1);
    if (memcmp(expect, ptr, cap) != 0) {
      fail_msg("iteration %d: fill of %llu bytes with %u-byte pattern differs",
               iter, (unsigned long long)size, ps);
    }
  }
  free(expect);
  accel_buffer_release(buf);
}

// Descriptors of one submit run in array order: a chain a->b->c->d where
// each copy reads what the previous one wrote.
static void test_dma_descriptors_of_a_submit_run_in_order(void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t size = 3u << 20;  // split over the engines
  uint8_t *p[4];
  accel_buffer_t *b[4];
  for (int i = 0; i < 4; ++i) {
    b[i] = alloc(f, size, ACCEL_MEMORY_KIND_DEVICE, &p[i]);
  }
  randomize(&rng, p[0], size);
  uint8_t *host = malloc(size);
  accel_dma_desc_t d[4];
  for (int i = 0; i < 3; ++i) {
    d[i] = (accel_dma_desc_t){.struct_size = sizeof(d[0]),
                              .op = ACCEL_DMA_OP_COPY_1D,
                              .dst = {.buffer = b[i + 1]},
                              .src = {.buffer = b[i]},
                              .width_bytes = size};
  }
  d[3] = (accel_dma_desc_t){.struct_size = sizeof(d[0]),
                            .op = ACCEL_DMA_OP_COPY_1D,
                            .dst = {.host = host},
                            .src = {.buffer = b[3]},
                            .width_bytes = size};
  run(f, d, 4);
  assert_memory_equal(p[3], p[0], size);
  assert_memory_equal(host, p[0], size);
  free(host);
  for (int i = 0; i < 4; ++i) {
    accel_buffer_release(b[i]);
  }
}

// Pageable sources may be reused as soon as the copy completed: each round
// overwrites the host source right after the signal and the device keeps the
// round's data; pageable destinations receive the data before the signal.
static void test_dma_staged_pageable_source_reused_after_completion(
    void **state) {
  fixture_t *f = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  uint64_t size = 1300000;  // several staging chunks, odd tail
  uint8_t *dev_ptr = NULL;
  accel_buffer_t *dev = alloc(f, size, ACCEL_MEMORY_KIND_DEVICE, &dev_ptr);
  uint8_t *src = malloc(size);
  uint8_t *back = malloc(size);
  uint8_t *keep = malloc(size);
  for (int round = 0; round < 12; ++round) {
    randomize(&rng, src, size);
    memcpy(keep, src, size);
    accel_dma_desc_t d = {.struct_size = sizeof(d),
                          .op = ACCEL_DMA_OP_COPY_1D,
                          .dst = {.buffer = dev},
                          .src = {.host = src},
                          .width_bytes = size};
    run(f, &d, 1);
    memset(src, 0xee, size);  // reuse at once
    assert_memory_equal(dev_ptr, keep, size);
    memset(back, 0, size);
    d = (accel_dma_desc_t){.struct_size = sizeof(d),
                           .op = ACCEL_DMA_OP_COPY_1D,
                           .dst = {.host = back},
                           .src = {.buffer = dev},
                           .width_bytes = size};
    run(f, &d, 1);
    assert_memory_equal(back, keep, size);
  }
  accel_dma_queue_counters_t c = {.struct_size = sizeof(c)};
  assert_accel_ok(accel_dma_queue_counters(f->queue, &c));
  assert_true(c.bytes_staged >= 24ull * size);
  free(src);
  free(back);
  free(keep);
  accel_buffer_release(dev);
}

// Copies within one buffer: overlapping ranges are rejected with a message,
// disjoint ones (including interleaved 2D columns) run.
static void test_dma_overlap_rejected_disjoint_accepted(void **state) {
  fixture_t *f = *state;
  uint8_t *p = NULL;
  accel_buffer_t *b = alloc(f, 8192, ACCEL_MEMORY_KIND_DEVICE, &p);
  for (int i = 0; i < 8192; ++i) {
    p[i] = (uint8_t)i;
  }
  accel_dma_desc_t d = {.struct_size = sizeof(d),
                        .op = ACCEL_DMA_OP_COPY_1D,
                        .dst = {.buffer = b, .offset = 100},
                        .src = {.buffer = b, .offset = 0},
                        .width_bytes = 101};
  assert_accel_status(
      accel_dma_submit(f->queue, &d, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "overlaps"));
  assert_non_null(strstr(accel_last_error(), "descriptor 0"));
  d.width_bytes = 100;  // adjacent, not overlapping
  run(f, &d, 1);
  for (int i = 0; i < 100; ++i) {
    assert_int_equal(p[100 + i], (uint8_t)i);
  }
  // Columns 0..15 of 64-byte rows into columns 32..47 of the same rows.
  d = (accel_dma_desc_t){.struct_size = sizeof(d),
                         .op = ACCEL_DMA_OP_COPY_2D,
                         .dst = {.buffer = b, .offset = 4096 + 32},
                         .src = {.buffer = b, .offset = 4096},
                         .width_bytes = 16,
                         .height = 32,
                         .dst_pitch = 64,
                         .src_pitch = 64};
  run(f, &d, 1);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 16; ++x) {
      assert_int_equal(p[4096 + y * 64 + 32 + x],
                       (uint8_t)(4096 + y * 64 + x));
    }
  }
  d.dst.offset = 4096 + 8;  // columns 8..23 overlap 0..15
  assert_accel_status(
      accel_dma_submit(f->queue, &d, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  // A segment whose source overlaps its destination.
  accel_dma_segment_t seg[2] = {{.dst_offset = 0, .src_offset = 512,
                                 .size_bytes = 64},
                                {.dst_offset = 1000, .src_offset = 1010,
                                 .size_bytes = 64}};
  d = (accel_dma_desc_t){.struct_size = sizeof(d),
                         .op = ACCEL_DMA_OP_COPY_SG,
                         .dst = {.buffer = b},
                         .src = {.buffer = b},
                         .segment_count = 2,
                         .segments = seg};
  assert_accel_status(
      accel_dma_submit(f->queue, &d, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "segment 1"));
  accel_buffer_release(b);
}

// Malformed descriptors are rejected with a message naming the descriptor,
// and nothing of the submit is queued.
static void test_dma_submit_rejects_bad_descriptors(void **state) {
  fixture_t *f = *state;
  uint8_t *p = NULL;
  accel_buffer_t *b = alloc(f, 4096, ACCEL_MEMORY_KIND_DEVICE, &p);
  accel_buffer_t *c = alloc(f, 4096, ACCEL_MEMORY_KIND_DEVICE, &p);
  uint8_t host[64];
  accel_dma_queue_counters_t before = {.struct_size = sizeof(before)};
  assert_accel_ok(accel_dma_queue_counters(f->queue, &before));
  accel_dma_desc_t good = {.struct_size = sizeof(good),
                           .op = ACCEL_DMA_OP_COPY_1D,
                           .dst = {.buffer = b},
                           .src = {.buffer = c},
                           .width_bytes = 64};
  accel_dma_desc_t d[2] = {good, good};
  d[1].width_bytes = 4097;  // out of bounds
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "descriptor 1"));
  assert_non_null(strstr(accel_last_error(), "outside the buffer"));

  d[1] = good;
  d[1].src.offset = 4050;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = good;
  d[1].op = 99;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = good;
  d[1].src = (accel_dma_ref_t){.host = host};
  d[1].dst = (accel_dma_ref_t){.host = host + 1};
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "both host pointers"));

  d[1] = good;
  d[1].dst.host = host;  // both buffer and host
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = good;
  d[1].op = ACCEL_DMA_OP_COPY_2D;
  d[1].height = 4;
  d[1].dst_pitch = 32;  // below the width
  d[1].src_pitch = 64;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "pitch"));

  d[1] = good;
  d[1].op = ACCEL_DMA_OP_COPY_3D;
  d[1].height = 2;
  d[1].depth = 2;
  d[1].dst_pitch = d[1].src_pitch = 64;
  d[1].dst_slice_pitch = 100;  // below a slice of 128 bytes
  d[1].src_slice_pitch = 128;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = (accel_dma_desc_t){.struct_size = sizeof(d[1]),
                            .op = ACCEL_DMA_OP_FILL,
                            .dst = {.buffer = b, .offset = 2},
                            .width_bytes = 64,
                            .pattern = 1,
                            .pattern_size = 4};  // misaligned offset
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  d[1].dst.offset = 0;
  d[1].pattern_size = 3;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  d[1].pattern_size = 1;
  d[1].pattern = 0x100;  // does not fit
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  d[1].pattern = 1;
  d[1].dst = (accel_dma_ref_t){.host = host};
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = good;
  d[1].op = ACCEL_DMA_OP_COPY_SG;
  d[1].segment_count = 3;
  d[1].segments = NULL;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  d[1] = good;
  d[1].struct_size = 8;  // differs from descriptor 0
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  d[0].struct_size = 8;
  assert_accel_status(
      accel_dma_submit(f->queue, d, 2, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  // Semaphore arrays.
  assert_accel_status(
      accel_dma_submit(f->queue, &good, 1, 1, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_semaphore_t *null_sem = NULL;
  uint64_t one = 1;
  assert_accel_status(
      accel_dma_submit(f->queue, &good, 1, 0, NULL, NULL, 1, &null_sem, &one),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(
      accel_dma_submit(NULL, &good, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(
      accel_dma_submit(f->queue, NULL, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);

  accel_dma_queue_counters_t after = {.struct_size = sizeof(after)};
  assert_accel_ok(accel_dma_queue_counters(f->queue, &after));
  assert_int_equal(after.submits, before.submits);
  assert_int_equal(after.ring_descriptors, before.ring_descriptors);
  // Zero-size work is accepted and does nothing.
  good.width_bytes = 0;
  run(f, &good, 1);
  accel_buffer_release(b);
  accel_buffer_release(c);
}

// A DMA descriptor naming a freed buffer (either side) fails at submit with
// a message naming the buffer, and nothing reaches the rings (issue 15).
static void test_dma_rejects_descriptors_on_freed_buffers(void **state) {
  fixture_t *f = *state;
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = 8 << 20};
  accel_buffer_t *live = NULL, *freed = NULL;
  assert_accel_ok(accel_buffer_alloc(f->env->device, &d, &live));
  assert_accel_ok(accel_buffer_alloc(f->env->device, &d, &freed));
  assert_accel_ok(accel_buffer_free(freed));
  accel_dma_queue_counters_t before = {.struct_size = sizeof(before)};
  assert_accel_ok(accel_dma_queue_counters(f->queue, &before));
  assert_accel_status(accel_dma_copy(f->queue, freed, 0, live, 0, 4096),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "destination buffer"));
  assert_non_null(strstr(accel_last_error(), "was freed"));
  assert_accel_status(accel_dma_copy(f->queue, live, 0, freed, 0, 4096),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "source buffer"));
  accel_dma_desc_t fill = {.struct_size = sizeof(fill),
                           .op = ACCEL_DMA_OP_FILL,
                           .dst = {.buffer = freed},
                           .width_bytes = 4096,
                           .pattern_size = 4};
  assert_accel_status(
      accel_dma_submit(f->queue, &fill, 1, 0, NULL, NULL, 0, NULL, NULL),
      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_dma_queue_counters_t after = {.struct_size = sizeof(after)};
  assert_accel_ok(accel_dma_queue_counters(f->queue, &after));
  assert_int_equal(after.submits, before.submits);
  accel_buffer_release(live);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dma_copy_1d_matches_reference),
      cmocka_unit_test(test_dma_rejects_descriptors_on_freed_buffers),
      cmocka_unit_test(test_dma_copy_2d_3d_match_reference),
      cmocka_unit_test(test_dma_large_2d_3d_copies_split_over_engines),
      cmocka_unit_test(test_dma_copy_sg_matches_reference),
      cmocka_unit_test(test_dma_fill_matches_reference),
      cmocka_unit_test(test_dma_descriptors_of_a_submit_run_in_order),
      cmocka_unit_test(test_dma_staged_pageable_source_reused_after_completion),
      cmocka_unit_test(test_dma_overlap_rejected_disjoint_accepted),
      cmocka_unit_test(test_dma_submit_rejects_bad_descriptors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
