// DLPack exchange: random strided views out and in against a reference
// written here, zero copy checked by writing through one side and reading
// the other, deleters counted, both forms, the stream handshake, misuse.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_driver.h"
#include "test_support.h"

static accel_buffer_t *alloc_buffer(test_env_t *env, uint64_t size) {
  accel_buffer_desc_t d = {.struct_size = sizeof(d), .size_bytes = size};
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_alloc(env->device, &d, &b));
  return b;
}

static uint8_t *host_of(accel_buffer_t *b) {
  void *p = NULL;
  assert_accel_ok(accel_buffer_host_pointer(b, &p));
  return p;
}

static accel_dlpack_export_desc_t export_desc(int32_t ndim, const int64_t *shape,
                                              const int64_t *strides) {
  return (accel_dlpack_export_desc_t){
      .struct_size = sizeof(accel_dlpack_export_desc_t),
      .dtype = {ACCEL_DL_FLOAT, 32, 1},
      .ndim = ndim,
      .shape = shape,
      .strides = strides,
  };
}

// A producer's tensor over malloc'd memory whose deleter counts its calls.
typedef struct producer {
  accel_dl_managed_tensor_versioned_t versioned;
  accel_dl_managed_tensor_t legacy;
  int64_t shape[4];
  int64_t strides[4];
  void *memory;
  int deleted;
} producer_t;

static void producer_versioned_deleter(accel_dl_managed_tensor_versioned_t *t) {
  producer_t *p = t->manager_ctx;
  p->deleted++;
}

static void producer_legacy_deleter(accel_dl_managed_tensor_t *t) {
  producer_t *p = t->manager_ctx;
  p->deleted++;
}

static void producer_init(producer_t *p, void *memory, int32_t ndim,
                          const int64_t *shape, const int64_t *strides,
                          uint64_t byte_offset) {
  memset(p, 0, sizeof(*p));
  p->memory = memory;
  memcpy(p->shape, shape, sizeof(int64_t) * (size_t)ndim);
  if (strides != NULL) {
    memcpy(p->strides, strides, sizeof(int64_t) * (size_t)ndim);
  }
  accel_dl_tensor_t t = {
      .data = memory,
      .device = {ACCEL_DL_CPU, 0},
      .ndim = ndim,
      .dtype = {ACCEL_DL_FLOAT, 32, 1},
      .shape = p->shape,
      .strides = strides != NULL ? p->strides : NULL,
      .byte_offset = byte_offset,
  };
  p->versioned = (accel_dl_managed_tensor_versioned_t){
      .version = {1, 1}, .manager_ctx = p,
      .deleter = producer_versioned_deleter, .dl_tensor = t};
  p->legacy = (accel_dl_managed_tensor_t){
      .dl_tensor = t, .manager_ctx = p, .deleter = producer_legacy_deleter};
}

static const accel_dlpack_import_desc_t k_import = {
    .struct_size = sizeof(accel_dlpack_import_desc_t)};

// The DLPack types of accel's dtypes, by hand; packed i4 and unknown values
// are refused.
static void test_dlpack_dtype_maps_accel_dtypes(void **state) {
  (void)state;
  struct { accel_dtype_t a; uint8_t code, bits; } want[] = {
      {ACCEL_DTYPE_F32, ACCEL_DL_FLOAT, 32}, {ACCEL_DTYPE_F16, ACCEL_DL_FLOAT, 16},
      {ACCEL_DTYPE_BF16, ACCEL_DL_BFLOAT, 16}, {ACCEL_DTYPE_I8, ACCEL_DL_INT, 8},
      {ACCEL_DTYPE_U8, ACCEL_DL_UINT, 8}, {ACCEL_DTYPE_I64, ACCEL_DL_INT, 64},
      {ACCEL_DTYPE_F64, ACCEL_DL_FLOAT, 64}, {ACCEL_DTYPE_U32, ACCEL_DL_UINT, 32},
      {ACCEL_DTYPE_F8E5M2, ACCEL_DL_FLOAT8_E5M2, 8},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); ++i) {
    accel_dl_dtype_t d;
    assert_accel_ok(accel_dlpack_dtype(want[i].a, &d));
    assert_int_equal(d.code, want[i].code);
    assert_int_equal(d.bits, want[i].bits);
    assert_int_equal(d.lanes, 1);
  }
  accel_dl_dtype_t d = {9, 9, 9};
  assert_accel_status(accel_dlpack_dtype(ACCEL_DTYPE_I4, &d), ACCEL_ERROR_UNSUPPORTED);
  assert_accel_status(accel_dlpack_dtype(ACCEL_DTYPE_COUNT, &d),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_int_equal(d.code, 9);  // untouched on failure
  assert_accel_status(accel_dlpack_dtype(ACCEL_DTYPE_F32, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
}

// The host device is kDLCPU 0.
static void test_dlpack_device_of_host_device_is_cpu(void **state) {
  test_env_t *env = *state;
  accel_dl_device_t d;
  assert_accel_ok(accel_dlpack_device(env->device, &d));
  assert_int_equal(d.device_type, ACCEL_DL_CPU);
  assert_int_equal(d.device_id, 0);
  assert_accel_status(accel_dlpack_device(NULL, &d), ACCEL_ERROR_INVALID_ARGUMENT);
}

// Random views (ndim 0-4, extents 0-5, strides compact, permuted, padded or
// negative, random offsets) export exactly when every element lies in the
// buffer, and each element read through the tensor is the one the
// reference addresses.
static void test_to_dlpack_random_views_match_reference(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  enum { SIZE = 512 };
  accel_buffer_t *b = alloc_buffer(env, SIZE);
  uint8_t *host = host_of(b);
  for (int i = 0; i < SIZE; ++i) {
    host[i] = (uint8_t)(i * 7 + 3);
  }
  int exported = 0, refused = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    int32_t ndim = (int32_t)test_rng_range(&rng, 0, 4);
    int64_t shape[4], strides[4];
    bool use_strides = test_rng_range(&rng, 0, 1);
    int64_t compact = 1;
    for (int32_t d = ndim - 1; d >= 0; --d) {
      shape[d] = (int64_t)test_rng_range(&rng, 0, 5);
      strides[d] = use_strides ? (int64_t)test_rng_range(&rng, 0, 40) - 12 : compact;
      compact *= shape[d] > 0 ? shape[d] : 1;
    }
    uint64_t offset = test_rng_range(&rng, 0, SIZE + 8) & ~3ull;
    // Reference: the lowest and highest byte any element touches.
    bool empty = false;
    int64_t lo = 0, hi = 0;
    for (int32_t d = 0; d < ndim; ++d) {
      if (shape[d] == 0) empty = true;
      int64_t reach = (shape[d] > 0 ? shape[d] - 1 : 0) * strides[d] * 4;
      if (reach < 0) lo += reach; else hi += reach;
    }
    bool fits = offset <= SIZE &&
                (empty || ((int64_t)offset + lo >= 0 && (int64_t)offset + hi + 4 <= SIZE));
    accel_dlpack_export_desc_t desc =
        export_desc(ndim, shape, use_strides ? strides : NULL);
    desc.offset_bytes = offset;
    accel_dl_managed_tensor_versioned_t *t = NULL;
    accel_status_t st = accel_buffer_to_dlpack(b, &desc, &t);
    if (!fits) {
      if (st != ACCEL_ERROR_INVALID_ARGUMENT) {
        fail_msg("iteration %d: a view outside the buffer gave %s", iter,
                 accel_status_name(st));
      }
      assert_null(t);
      ++refused;
      continue;
    }
    if (st != ACCEL_OK) {
      fail_msg("iteration %d: %s", iter, accel_last_error());
    }
    ++exported;
    assert_int_equal(t->version.major, 1);
    assert_int_equal(t->flags, 0);
    assert_int_equal(t->dl_tensor.ndim, ndim);
    assert_ptr_equal(t->dl_tensor.data, host);
    assert_int_equal(t->dl_tensor.byte_offset, offset);
    if (ndim > 0) {
      assert_non_null(t->dl_tensor.strides);
    }
    // Walk every element by its multi-index and compare bytes.
    int64_t idx[4] = {0};
    int64_t total = 1;
    for (int32_t d = 0; d < ndim; ++d) total *= shape[d];
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e, ref = (int64_t)offset, got = (int64_t)t->dl_tensor.byte_offset;
      for (int32_t d = ndim - 1; d >= 0; --d) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
        ref += idx[d] * strides[d] * 4;
        got += idx[d] * t->dl_tensor.strides[d] * 4;
        assert_int_equal(t->dl_tensor.shape[d], shape[d]);
      }
      assert_int_equal(got, ref);
      assert_memory_equal((uint8_t *)t->dl_tensor.data + got, host + ref, 4);
    }
    t->deleter(t);
  }
  printf("exported %d views, refused %d\n", exported, refused);
  assert_true(exported > 100 && refused > 100);
  assert_accel_ok(accel_buffer_free(b));
}

// The tensor keeps the buffer alive after the owner frees it; the deleter
// drops the last reference.
static void test_to_dlpack_tensor_outlives_owner_free(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 256);
  memset(host_of(b), 0x5a, 256);
  int64_t shape[1] = {64};
  accel_dlpack_export_desc_t desc = export_desc(1, shape, NULL);
  accel_dl_managed_tensor_versioned_t *t = NULL;
  assert_accel_ok(accel_buffer_to_dlpack(b, &desc, &t));
  assert_accel_ok(accel_buffer_free(b));
  uint8_t *p = t->dl_tensor.data;
  for (int i = 0; i < 256; ++i) assert_int_equal(p[i], 0x5a);
  assert_int_equal(t->dl_tensor.strides[0], 1);
  t->deleter(t);
}

// The legacy form has no read-only flag: a read-only view is refused there
// and flagged in the versioned form.
static void test_to_dlpack_read_only_only_in_versioned_form(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 64);
  int64_t shape[1] = {16};
  accel_dlpack_export_desc_t desc = export_desc(1, shape, NULL);
  desc.flags = ACCEL_DLPACK_EXPORT_READ_ONLY;
  accel_dl_managed_tensor_t *legacy = NULL;
  assert_accel_status(accel_buffer_to_dlpack_legacy(b, &desc, &legacy),
                      ACCEL_ERROR_UNSUPPORTED);
  assert_null(legacy);
  accel_dl_managed_tensor_versioned_t *t = NULL;
  assert_accel_ok(accel_buffer_to_dlpack(b, &desc, &t));
  assert_int_equal(t->flags, ACCEL_DL_FLAG_READ_ONLY);
  t->deleter(t);
  desc.flags = 0;
  assert_accel_ok(accel_buffer_to_dlpack_legacy(b, &desc, &legacy));
  assert_int_equal(legacy->dl_tensor.shape[0], 16);
  legacy->deleter(legacy);
  assert_accel_ok(accel_buffer_free(b));
}

// Misuse is refused with a message and leaves the output untouched.
static void test_to_dlpack_rejects_misuse(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 64);
  int64_t shape[1] = {16}, neg[1] = {-1};
  accel_dl_managed_tensor_versioned_t *t = (void *)&shape;  // sentinel
  accel_dlpack_export_desc_t desc = export_desc(1, shape, NULL);
  assert_accel_status(accel_buffer_to_dlpack(NULL, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_to_dlpack(b, NULL, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, NULL), ACCEL_ERROR_INVALID_ARGUMENT);
  desc.struct_size = 8;
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  desc = export_desc(1, shape, NULL);
  desc.flags = 0x80;
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  desc = export_desc(33, shape, NULL);
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  desc = export_desc(1, NULL, NULL);
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  desc = export_desc(1, neg, NULL);
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "shape[0] is negative"));
  desc = export_desc(1, shape, NULL);
  desc.dtype.bits = 4;
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  desc.dtype = (accel_dl_dtype_t){ACCEL_DL_FLOAT, 32, 0};
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  shape[0] = 17;
  desc = export_desc(1, shape, NULL);
  assert_accel_status(accel_buffer_to_dlpack(b, &desc, &t), ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "bytes [0, 68) of a buffer of 64"));
  assert_ptr_equal(t, (void *)&shape);
  assert_accel_ok(accel_buffer_free(b));
}

static accel_status_t slow_write(void *user_data) {
  usleep(20000);
  *(volatile uint32_t *)user_data = 0xfeedu;
  return ACCEL_OK;
}

static accel_status_t gate_wait(void *user_data) {
  while (!atomic_load((_Atomic int *)user_data)) usleep(100);
  return ACCEL_OK;
}

static accel_status_t mark(void *user_data) {
  atomic_store((_Atomic int *)user_data, 1);
  return ACCEL_OK;
}

// Handshake, host consumer: the producer stream's work is complete when the
// tensor is returned.
static void test_to_dlpack_host_consumer_waits_for_producer(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 64);
  uint32_t *word = (uint32_t *)host_of(b);
  *word = 0;
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_ok(accel_stream_host_call(s, slow_write, word));
  int64_t shape[1] = {16};
  accel_dlpack_export_desc_t desc = export_desc(1, shape, NULL);
  desc.producer_stream = s;
  accel_dl_managed_tensor_versioned_t *t = NULL;
  assert_accel_ok(accel_buffer_to_dlpack(b, &desc, &t));
  assert_int_equal(*(uint32_t *)t->dl_tensor.data, 0xfeedu);
  t->deleter(t);
  accel_stream_destroy(s);
  assert_accel_ok(accel_buffer_free(b));
}

// Handshake, stream consumer: the consumer stream waits for the producer's
// work without the host blocking.
static void test_to_dlpack_consumer_stream_waits_on_device(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 64);
  accel_stream_t *producer = NULL, *consumer = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &producer));
  assert_accel_ok(accel_stream_create(env->device, NULL, &consumer));
  _Atomic int gate = 0, ran = 0;
  assert_accel_ok(accel_stream_host_call(producer, gate_wait, (void *)&gate));
  int64_t shape[1] = {16};
  accel_dlpack_export_desc_t desc = export_desc(1, shape, NULL);
  desc.producer_stream = producer;
  desc.consumer_stream = consumer;
  accel_dl_managed_tensor_versioned_t *t = NULL;
  assert_accel_ok(accel_buffer_to_dlpack(b, &desc, &t));  // does not block
  assert_accel_ok(accel_stream_host_call(consumer, mark, (void *)&ran));
  usleep(20000);
  assert_int_equal(atomic_load(&ran), 0);
  atomic_store(&gate, 1);
  assert_accel_ok(accel_stream_synchronize(consumer, ACCEL_TIMEOUT_INFINITE));
  assert_int_equal(atomic_load(&ran), 1);
  t->deleter(t);
  accel_stream_destroy(consumer);
  accel_stream_destroy(producer);
  assert_accel_ok(accel_buffer_free(b));
}

// A kDLCPU tensor on the host device is wrapped without a copy: writes on
// either side are seen on the other; the deleter runs once, at the last
// release, in both forms.
static void test_from_dlpack_wraps_host_memory_zero_copy(void **state) {
  test_env_t *env = *state;
  for (int legacy = 0; legacy < 2; ++legacy) {
    float *mem = calloc(64, sizeof(float));
    int64_t shape[2] = {8, 8};
    producer_t p;
    producer_init(&p, mem, 2, shape, NULL, 0);
    accel_buffer_t *b = NULL;
    uint64_t offset = 99;
    if (legacy) {
      assert_accel_ok(accel_buffer_from_dlpack_legacy(env->device, &p.legacy,
                                                      &k_import, &b, &offset));
    } else {
      assert_accel_ok(accel_buffer_from_dlpack(env->device, &p.versioned,
                                               &k_import, &b, &offset));
    }
    assert_int_equal(offset, 0);
    assert_int_equal(accel_buffer_size(b), 256);
    assert_ptr_equal(host_of(b), mem);
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, NULL, &s));
    uint32_t pattern = 0x3f800000u;  // 1.0f
    assert_accel_ok(accel_stream_fill(s, b, 16, 32, pattern, 4));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    for (int i = 0; i < 64; ++i) {
      assert_true(mem[i] == ((i >= 4 && i < 12) ? 1.0f : 0.0f));
    }
    mem[63] = 42.0f;
    float back = 0;
    assert_accel_ok(accel_stream_copy_to_host(s, &back, b, 252, 4));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_true(back == 42.0f);
    accel_stream_destroy(s);
    accel_buffer_retain(b);
    accel_buffer_release(b);
    assert_int_equal(p.deleted, 0);
    accel_buffer_release(b);
    assert_int_equal(p.deleted, 1);
    free(mem);
  }
}

// Negative strides and a byte offset: the buffer spans exactly the bytes the
// tensor addresses, and the offset of element 0 is reported.
static void test_from_dlpack_negative_strides_span_exact_bytes(void **state) {
  test_env_t *env = *state;
  float *mem = calloc(32, sizeof(float));
  int64_t shape[2] = {3, 4}, strides[2] = {-8, 1};
  producer_t p;
  // Element 0 at float 17: rows at 17, 9, 1; span floats [1, 21).
  producer_init(&p, mem, 2, shape, strides, 17 * 4);
  accel_buffer_t *b = NULL;
  uint64_t offset = 0;
  assert_accel_ok(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import,
                                           &b, &offset));
  assert_ptr_equal(host_of(b), mem + 1);
  assert_int_equal(accel_buffer_size(b), 20 * 4);
  assert_int_equal(offset, 16 * 4);
  accel_buffer_release(b);
  assert_int_equal(p.deleted, 1);
  free(mem);
}

// ACCEL_DLPACK_IMPORT_COPY copies and lets go of the producer at once (no
// stream), or after the copy on the stream.
static void test_from_dlpack_copy_releases_producer_after_copy(void **state) {
  test_env_t *env = *state;
  for (int on_stream = 0; on_stream < 2; ++on_stream) {
    float mem[16];
    for (int i = 0; i < 16; ++i) mem[i] = (float)i;
    int64_t shape[1] = {16};
    producer_t p;
    producer_init(&p, mem, 1, shape, NULL, 0);
    accel_stream_t *s = NULL;
    assert_accel_ok(accel_stream_create(env->device, NULL, &s));
    accel_dlpack_import_desc_t d = k_import;
    d.flags = ACCEL_DLPACK_IMPORT_COPY;
    d.stream = on_stream ? s : NULL;
    accel_buffer_t *b = NULL;
    assert_accel_ok(accel_buffer_from_dlpack(env->device, &p.versioned, &d, &b, NULL));
    assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
    assert_int_equal(p.deleted, 1);
    mem[3] = -1.0f;  // the copy does not see it
    float *copy = (float *)host_of(b);
    assert_ptr_not_equal(copy, mem);
    for (int i = 0; i < 16; ++i) assert_true(copy[i] == (float)i);
    accel_stream_destroy(s);
    accel_buffer_release(b);
    assert_int_equal(p.deleted, 1);
  }
}

// A READ_ONLY tensor gives a buffer that commands may not write.
static void test_from_dlpack_read_only_tensor_refuses_writes(void **state) {
  test_env_t *env = *state;
  float mem[16] = {0};
  int64_t shape[1] = {16};
  producer_t p;
  producer_init(&p, mem, 1, shape, NULL, 0);
  p.versioned.flags = ACCEL_DL_FLAG_READ_ONLY;
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import, &b, NULL));
  accel_stream_t *s = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  uint8_t zero = 0;
  assert_accel_status(accel_stream_fill(s, b, 0, 64, zero, 1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "read-only"));
  accel_stream_destroy(s);
  accel_buffer_release(b);
  assert_int_equal(p.deleted, 1);
}

// Refusals leave the tensor the caller's: no deleter call.
static void test_from_dlpack_refusals_keep_tensor(void **state) {
  test_env_t *env = *state;
  float mem[16] = {0};
  int64_t shape[1] = {16};
  producer_t p;
  producer_init(&p, mem, 1, shape, NULL, 0);
  accel_buffer_t *b = (void *)&p;  // sentinel
  p.versioned.version.major = 2;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import, &b, NULL),
                      ACCEL_ERROR_VERSION);
  p.versioned.version.major = 1;
  accel_dlpack_import_desc_t d = k_import;
  d.flags = ACCEL_DLPACK_IMPORT_COPY | ACCEL_DLPACK_IMPORT_NO_COPY;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &d, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  d.struct_size = 4;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &d, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // CUDA memory: the host device can neither address nor read it.
  p.versioned.dl_tensor.device = (accel_dl_device_t){ACCEL_DL_CUDA, 0};
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import, &b, NULL),
                      ACCEL_ERROR_UNSUPPORTED);
  d = k_import;
  d.flags = ACCEL_DLPACK_IMPORT_NO_COPY;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &d, &b, NULL),
                      ACCEL_ERROR_UNSUPPORTED);
  assert_non_null(strstr(accel_last_error(), "copying was not allowed"));
  p.versioned.dl_tensor.device = (accel_dl_device_t){ACCEL_DL_CPU, 0};
  p.versioned.dl_tensor.data = NULL;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  // Bytes that would wrap around the address space.
  p.versioned.dl_tensor.data = mem;
  p.versioned.dl_tensor.byte_offset = UINT64_MAX - 8;
  assert_accel_status(accel_buffer_from_dlpack(env->device, &p.versioned, &k_import, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "wrap around"));
  p.versioned.dl_tensor.byte_offset = 0;
  p.versioned.dl_tensor.data = NULL;
  assert_accel_status(accel_buffer_from_dlpack(NULL, &p.versioned, &k_import, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_buffer_from_dlpack(env->device, NULL, &k_import, &b, NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_ptr_equal(b, (void *)&p);
  assert_int_equal(p.deleted, 0);
}

// Handshake, import on a stream: work after the import waits for the
// producer's semaphore.
static void test_from_dlpack_stream_waits_for_ready_semaphore(void **state) {
  test_env_t *env = *state;
  float mem[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  producer_t p;
  producer_init(&p, mem, 1, shape, NULL, 0);
  accel_stream_t *s = NULL;
  accel_semaphore_t *ready = NULL;
  assert_accel_ok(accel_stream_create(env->device, NULL, &s));
  assert_accel_ok(accel_semaphore_create(env->device, 0, &ready));
  accel_dlpack_import_desc_t d = k_import;
  d.stream = s;
  d.ready_semaphore = ready;
  d.ready_value = 5;
  accel_buffer_t *b = NULL;
  assert_accel_ok(accel_buffer_from_dlpack(env->device, &p.versioned, &d, &b, NULL));
  float out[4] = {0};
  assert_accel_ok(accel_stream_copy_to_host(s, out, b, 0, sizeof(out)));
  usleep(20000);
  assert_int_equal(accel_stream_query(s), ACCEL_ERROR_NOT_READY);
  mem[2] = 30.0f;  // the producer finishes writing, then signals
  assert_accel_ok(accel_semaphore_signal(ready, 5));
  assert_accel_ok(accel_stream_synchronize(s, ACCEL_TIMEOUT_INFINITE));
  assert_true(out[0] == 1.0f && out[2] == 30.0f && out[3] == 4.0f);
  accel_semaphore_release(ready);
  accel_stream_destroy(s);
  accel_buffer_release(b);
  assert_int_equal(p.deleted, 1);
}

// accel's own export imported back is the same memory; each side's deleter
// runs once.
static void test_round_trip_through_dlpack_is_same_memory(void **state) {
  test_env_t *env = *state;
  accel_buffer_t *b = alloc_buffer(env, 1024);
  int64_t shape[2] = {16, 16};
  accel_dlpack_export_desc_t desc = export_desc(2, shape, NULL);
  accel_dl_managed_tensor_versioned_t *t = NULL;
  assert_accel_ok(accel_buffer_to_dlpack(b, &desc, &t));
  accel_buffer_t *back = NULL;
  assert_accel_ok(accel_buffer_from_dlpack(env->device, t, &k_import, &back, NULL));
  assert_int_equal(accel_buffer_address(back), accel_buffer_address(b));
  assert_int_equal(accel_buffer_size(back), 1024);
  assert_accel_ok(accel_buffer_free(b));
  host_of(back)[5] = 9;  // the export's reference keeps the memory
  accel_buffer_release(back);  // runs the export's deleter
}

// Memory of another device (kDLExtDev 5) is refused; a copy whose
// allocation fails (fault injection) leaves the tensor the caller's, and
// one that succeeds lets go of it once.
static void test_from_dlpack_failed_copy_keeps_tensor(void **state) {
  (void)state;
  accel_runtime_t *rt = NULL;
  accel_device_t *dev = NULL;
  assert_accel_ok(fault_runtime_create(NULL, &rt));
  assert_accel_ok(accel_device_get(rt, 0, &dev));
  float mem[4] = {1, 2, 3, 4};
  int64_t four[1] = {4};
  producer_t p;
  producer_init(&p, mem, 1, four, NULL, 0);
  accel_buffer_t *back = NULL;
  p.versioned.dl_tensor.device = (accel_dl_device_t){ACCEL_DL_EXT_DEV, 5};
  assert_accel_status(accel_buffer_from_dlpack(dev, &p.versioned, &k_import,
                                               &back, NULL),
                      ACCEL_ERROR_UNSUPPORTED);
  p.versioned.dl_tensor.device = (accel_dl_device_t){ACCEL_DL_CPU, 0};
  accel_dlpack_import_desc_t copy = k_import;
  copy.flags = ACCEL_DLPACK_IMPORT_COPY;
  // Fail every physical allocation the copy's buffer could need.
  fault_driver_arm(FAULT_OP_PHYS_CREATE, 1, ACCEL_ERROR_OUT_OF_MEMORY);
  accel_status_t st =
      accel_buffer_from_dlpack(dev, &p.versioned, &copy, &back, NULL);
  uint32_t calls = fault_driver_calls(FAULT_OP_PHYS_CREATE);
  fault_driver_reset();
  printf("copy import with a failing allocation: %s after %u physical "
         "allocation(s)\n", accel_status_name(st), calls);
  if (calls > 0) {
    assert_int_equal(st, ACCEL_ERROR_OUT_OF_MEMORY);
    assert_int_equal(p.deleted, 0);
    assert_null(back);
  } else {  // served from memory the allocator already had
    assert_accel_ok(st);
    accel_buffer_release(back);
    back = NULL;
  }
  assert_accel_ok(accel_buffer_from_dlpack(dev, &p.versioned, &copy, &back, NULL));
  assert_int_equal(p.deleted, calls > 0 ? 1 : 2);
  accel_buffer_release(back);
  accel_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dlpack_dtype_maps_accel_dtypes),
      cmocka_unit_test(test_dlpack_device_of_host_device_is_cpu),
      cmocka_unit_test(test_to_dlpack_random_views_match_reference),
      cmocka_unit_test(test_to_dlpack_tensor_outlives_owner_free),
      cmocka_unit_test(test_to_dlpack_read_only_only_in_versioned_form),
      cmocka_unit_test(test_to_dlpack_rejects_misuse),
      cmocka_unit_test(test_to_dlpack_host_consumer_waits_for_producer),
      cmocka_unit_test(test_to_dlpack_consumer_stream_waits_on_device),
      cmocka_unit_test(test_from_dlpack_wraps_host_memory_zero_copy),
      cmocka_unit_test(test_from_dlpack_negative_strides_span_exact_bytes),
      cmocka_unit_test(test_from_dlpack_copy_releases_producer_after_copy),
      cmocka_unit_test(test_from_dlpack_read_only_tensor_refuses_writes),
      cmocka_unit_test(test_from_dlpack_refusals_keep_tensor),
      cmocka_unit_test(test_from_dlpack_stream_waits_for_ready_semaphore),
      cmocka_unit_test(test_round_trip_through_dlpack_is_same_memory),
      cmocka_unit_test(test_from_dlpack_failed_copy_keeps_tensor),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
