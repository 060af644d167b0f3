// Executables: builder -> loader round trips for every section kind, dtype,
// layout and quantization scheme; version and requirement negotiation;
// lookups; accel-pack and accel-inspect end to end.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"

static void *g_so;
static uint64_t g_so_size;
static char g_target[32];

static void add_kernels(accel_exe_builder_t *b) {
  accel_kernel_binding_decl_t vb[3] = {
      {.name = "a", .access = ACCEL_KERNEL_ACCESS_READ, .min_size_bytes = 4,
       .alignment = 4},
      {.name = "b", .access = ACCEL_KERNEL_ACCESS_READ, .min_size_bytes = 4},
      {.name = "out", .access = ACCEL_KERNEL_ACCESS_WRITE, .min_size_bytes = 4},
  };
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = "vector_add",
                               .binding_count = 3, .bindings = vb,
                               .constants_size = 4,
                               .workgroup_size = {256, 1, 1}};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  accel_exe_kernel_desc_t e = {.struct_size = sizeof(e), .name = "nothing",
                               .symbol = "empty"};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &e));
  assert_accel_ok(accel_exe_builder_add_code(
      b, g_target, ACCEL_CODE_FORMAT_ELF_SO, g_so, g_so_size));
}

static void fill_random(test_rng_t *rng, uint8_t *p, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    p[i] = (uint8_t)test_rng_next(rng);
  }
}

// Every dtype, both layouts, every quantization scheme, metadata and kernels
// come back from the loader as they were written; weights alias the image.
static void test_builder_round_trip_every_section_kind_and_dtype(void **state) {
  test_env_t *env = *state;
  test_rng_t rng;
  test_rng_init(&rng, __func__);
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  add_kernels(b);
  uint8_t *data[ACCEL_DTYPE_COUNT] = {0};
  accel_weight_info_t want[ACCEL_DTYPE_COUNT + 8];
  char names[ACCEL_DTYPE_COUNT][32];
  int nw = 0;
  for (int d = 1; d < ACCEL_DTYPE_COUNT; ++d) {
    accel_exe_weight_desc_t w = {.struct_size = sizeof(w), .mappable = d & 1};
    accel_weight_info_t *in = &w.info;
    in->struct_size = sizeof(*in);
    snprintf(names[d], sizeof(names[d]), "w_%s",
             accel_dtype_name((accel_dtype_t)d));
    in->name = names[d];
    in->dtype = (uint32_t)d;
    in->rank = (uint32_t)test_rng_range(&rng, 0, 3);
    uint64_t elements = 1;
    for (uint32_t r = 0; r < in->rank; ++r) {
      in->shape[r] = test_rng_range(&rng, 1, 9);
      elements *= in->shape[r];
    }
    in->size_bytes = (elements * accel_dtype_bits((accel_dtype_t)d) + 7) / 8;
    data[d] = malloc(in->size_bytes + 1);
    fill_random(&rng, data[d], in->size_bytes);
    in->host_data = data[d];
    assert_accel_ok(accel_exe_builder_add_weight(b, &w));
    want[nw++] = *in;
  }
  // Blocked 5x7 f32 in 4x4 tiles: padded to 8x8.
  static float blocked[64];
  accel_exe_weight_desc_t bw = {.struct_size = sizeof(bw)};
  bw.info = (accel_weight_info_t){
      .struct_size = sizeof(bw.info), .name = "blocked", .dtype = ACCEL_DTYPE_F32,
      .rank = 2, .shape = {5, 7}, .layout = ACCEL_WEIGHT_LAYOUT_BLOCKED,
      .block = {4, 4}, .host_data = blocked, .size_bytes = sizeof(blocked)};
  assert_accel_ok(accel_exe_builder_add_weight(b, &bw));
  // Strided: a 3x3 view with row stride 4 over 11 elements.
  static float strided[11];
  accel_exe_weight_desc_t sw = {.struct_size = sizeof(sw)};
  sw.info = (accel_weight_info_t){
      .struct_size = sizeof(sw.info), .name = "strided", .dtype = ACCEL_DTYPE_F32,
      .rank = 2, .shape = {3, 3}, .strides = {4, 1}, .host_data = strided,
      .size_bytes = sizeof(strided)};
  assert_accel_ok(accel_exe_builder_add_weight(b, &sw));
  // Quantized i4 8x16: per-tensor, per-channel (axis 0) and group-wise
  // (axis 1, groups of 4) with zero points.
  static uint8_t q4[64];
  static float s1[1], s8[8], s32[32];
  static int8_t z32[32];
  struct {
    const char *name, *scale, *zero;
    uint32_t scheme, axis, group;
  } qs[3] = {{"q_tensor", "s1", NULL, ACCEL_QUANT_PER_TENSOR, 0, 0},
             {"q_channel", "s8", NULL, ACCEL_QUANT_PER_CHANNEL, 0, 0},
             {"q_group", "s32", "z32", ACCEL_QUANT_GROUPWISE, 1, 4}};
  for (int i = 0; i < 3; ++i) {
    accel_exe_weight_desc_t qw = {.struct_size = sizeof(qw)};
    qw.info = (accel_weight_info_t){
        .struct_size = sizeof(qw.info), .name = qs[i].name,
        .dtype = ACCEL_DTYPE_I4, .rank = 2, .shape = {8, 16},
        .host_data = q4, .size_bytes = sizeof(q4),
        .quant_scheme = qs[i].scheme, .quant_axis = qs[i].axis,
        .quant_group_size = qs[i].group, .quant_scale = qs[i].scale,
        .quant_zero_point = qs[i].zero};
    assert_accel_ok(accel_exe_builder_add_weight(b, &qw));
  }
  struct {
    const char *name;
    uint32_t dtype;
    uint64_t n;
    const void *p;
  } comp[4] = {{"s1", ACCEL_DTYPE_F32, 1, s1},
               {"s8", ACCEL_DTYPE_F32, 8, s8},
               {"s32", ACCEL_DTYPE_F32, 32, s32},
               {"z32", ACCEL_DTYPE_I8, 32, z32}};
  for (int i = 0; i < 4; ++i) {
    accel_exe_weight_desc_t cw = {.struct_size = sizeof(cw)};
    cw.info = (accel_weight_info_t){
        .struct_size = sizeof(cw.info), .name = comp[i].name,
        .dtype = comp[i].dtype, .rank = 1, .shape = {comp[i].n},
        .host_data = comp[i].p,
        .size_bytes = comp[i].n * accel_dtype_bits(comp[i].dtype) / 8};
    assert_accel_ok(accel_exe_builder_add_weight(b, &cw));
  }
  assert_accel_ok(accel_exe_builder_add_metadata(b, "model", "round trip"));
  assert_accel_ok(accel_exe_builder_add_metadata(b, "empty", ""));
  accel_exe_requirements_t req = {.struct_size = sizeof(req),
                                  .required_caps = ACCEL_DEVICE_CAP_HOST_KERNELS,
                                  .workspace_bytes = 12345,
                                  .workspace_alignment = 256};
  assert_accel_ok(accel_exe_builder_set_requirements(b, &req));
  uint8_t uuid[16];
  fill_random(&rng, uuid, 16);
  assert_accel_ok(accel_exe_builder_set_uuid(b, uuid));

  void *image;
  uint64_t size;
  assert_accel_ok(accel_exe_builder_write_memory(b, &image, &size));
  accel_exe_builder_destroy(b);
  accel_executable_t *exe;
  assert_accel_ok(accel_executable_load_memory(env->runtime, env->device,
                                               image, size, 0, &exe));
  accel_executable_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_executable_info(exe, &info));
  assert_int_equal(info.format_major, ACCEL_EXE_FORMAT_VERSION_MAJOR);
  assert_memory_equal(info.uuid, uuid, 16);
  assert_int_equal(info.kernel_count, 2);
  assert_int_equal(info.weight_count, ACCEL_DTYPE_COUNT - 1 + 2 + 3 + 4);
  assert_int_equal(info.metadata_count, 2);
  assert_int_equal(info.workspace_bytes, 12345);
  assert_string_equal(info.target, g_target);

  for (int i = 0; i < nw; ++i) {
    accel_weight_info_t got = {.struct_size = sizeof(got)};
    assert_accel_ok(accel_executable_weight(exe, want[i].name, &got));
    assert_int_equal(got.dtype, want[i].dtype);
    assert_int_equal(got.rank, want[i].rank);
    assert_memory_equal(got.shape, want[i].shape, sizeof(got.shape));
    assert_int_equal(got.size_bytes, want[i].size_bytes);
    assert_non_null(got.host_data);
    // No copy: the data lies inside the image, 64-byte aligned.
    assert_true((const uint8_t *)got.host_data >= (const uint8_t *)image &&
                (const uint8_t *)got.host_data < (const uint8_t *)image + size);
    assert_int_equal((uintptr_t)got.host_data % 64, 0);
    if (want[i].dtype & 1) {
      assert_int_equal(((const uint8_t *)got.host_data - (const uint8_t *)image) % 4096, 0);
    }
    assert_memory_equal(got.host_data, want[i].host_data, want[i].size_bytes);
  }
  accel_weight_info_t got = {.struct_size = sizeof(got)};
  assert_accel_ok(accel_executable_weight(exe, "blocked", &got));
  assert_int_equal(got.layout, ACCEL_WEIGHT_LAYOUT_BLOCKED);
  assert_int_equal(got.block[0], 4);
  assert_int_equal(got.size_bytes, 256);
  assert_accel_ok(accel_executable_weight(exe, "strided", &got));
  assert_int_equal(got.strides[0], 4);
  assert_accel_ok(accel_executable_weight(exe, "q_group", &got));
  assert_int_equal(got.quant_scheme, ACCEL_QUANT_GROUPWISE);
  assert_int_equal(got.quant_axis, 1);
  assert_int_equal(got.quant_group_size, 4);
  assert_string_equal(got.quant_scale, "s32");
  assert_string_equal(got.quant_zero_point, "z32");
  assert_accel_ok(accel_executable_weight(exe, "q_channel", &got));
  assert_int_equal(got.quant_scheme, ACCEL_QUANT_PER_CHANNEL);
  assert_null(got.quant_zero_point);
  assert_accel_status(accel_executable_weight(exe, "nope", &got),
                      ACCEL_ERROR_NOT_FOUND);

  const char *value;
  assert_accel_ok(accel_executable_metadata(exe, "model", &value));
  assert_string_equal(value, "round trip");
  assert_accel_ok(accel_executable_metadata(exe, "empty", &value));
  assert_string_equal(value, "");
  assert_accel_status(accel_executable_metadata(exe, "x", &value),
                      ACCEL_ERROR_NOT_FOUND);

  accel_kernel_t *k;
  assert_accel_ok(accel_executable_kernel(exe, "vector_add", &k));
  accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
  assert_accel_ok(accel_kernel_info(k, &ki));
  assert_string_equal(ki.name, "vector_add");
  assert_int_equal(ki.binding_count, 3);
  assert_int_equal(ki.constants_size, 4);
  assert_int_equal(ki.workgroup_size[0], 256);
  assert_int_equal(ki.abi_version, ACCEL_KERNEL_ABI_VERSION);
  assert_string_equal(ki.bindings[2].name, "out");
  assert_int_equal(ki.bindings[2].access, ACCEL_KERNEL_ACCESS_WRITE);
  assert_int_equal(ki.bindings[0].alignment, 4);
  accel_kernel_t *k1;
  assert_accel_ok(accel_executable_kernel_at(exe, 1, &k1));
  assert_accel_ok(accel_kernel_info(k1, &ki));
  assert_string_equal(ki.name, "nothing");
  assert_accel_status(accel_executable_kernel_at(exe, 2, &k1),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_executable_kernel(exe, "missing", &k1),
                      ACCEL_ERROR_NOT_FOUND);
  assert_non_null(strstr(accel_last_error(), "vector_add"));

  // A kernel reference keeps the executable alive.
  accel_kernel_retain(k);
  accel_executable_release(exe);
  assert_accel_ok(accel_kernel_info(k, &ki));
  accel_kernel_release(k);
  free(image);
  for (int d = 0; d < ACCEL_DTYPE_COUNT; ++d) {
    free(data[d]);
  }
}

static void *build_image(accel_exe_builder_t *b, uint64_t *size) {
  void *image;
  assert_accel_ok(accel_exe_builder_write_memory(b, &image, size));
  accel_exe_builder_destroy(b);
  return image;
}

// An older-minor reader skips an optional section of an unknown kind and
// refuses a required one with ACCEL_ERROR_VERSION.
static void test_executable_skips_optional_and_refuses_required_unknown(
    void **state) {
  test_env_t *env = *state;
  static const char blob[100] = "from a newer compiler";
  for (uint32_t required = 0; required < 2; ++required) {
    accel_exe_builder_t *b;
    assert_accel_ok(accel_exe_builder_create(&b));
    add_kernels(b);
    assert_accel_ok(
        accel_exe_builder_add_raw_section(b, 4242, required, blob, sizeof(blob)));
    uint64_t size;
    void *image = build_image(b, &size);
    accel_executable_t *exe = NULL;
    accel_status_t st = accel_executable_load_memory(env->runtime, env->device,
                                                     image, size, 0, &exe);
    if (required) {
      assert_accel_status(st, ACCEL_ERROR_VERSION);
      assert_non_null(strstr(accel_last_error(), "unknown kind 4242"));
      assert_null(exe);
    } else {
      assert_accel_ok(st);
      accel_executable_release(exe);
    }
    free(image);
  }
  // A defined kind cannot be added raw.
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  assert_accel_status(accel_exe_builder_add_raw_section(b, 3, 0, blob, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_exe_builder_destroy(b);
}

// Requirements refuse early: a newer runtime, a missing capability, a
// workspace larger than the device.
static void test_executable_load_checks_requirements(void **state) {
  test_env_t *env = *state;
  struct {
    accel_exe_requirements_t req;
    accel_status_t want;
    const char *substring;
  } cases[] = {
      {{.struct_size = sizeof(accel_exe_requirements_t),
        .min_runtime_version = ACCEL_API_VERSION_MAJOR << 16 | 0x7fff},
       ACCEL_ERROR_VERSION, "min_runtime_version"},
      {{.struct_size = sizeof(accel_exe_requirements_t),
        .required_caps = 1u << 30},
       ACCEL_ERROR_UNSUPPORTED, "required_caps"},
      {{.struct_size = sizeof(accel_exe_requirements_t),
        .workspace_bytes = 1ull << 60},
       ACCEL_ERROR_OUT_OF_MEMORY, "workspace_bytes"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    accel_exe_builder_t *b;
    assert_accel_ok(accel_exe_builder_create(&b));
    assert_accel_ok(accel_exe_builder_set_requirements(b, &cases[i].req));
    uint64_t size;
    void *image = build_image(b, &size);
    accel_executable_t *exe = NULL;
    assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                     image, size, 0, &exe),
                        cases[i].want);
    assert_non_null(strstr(accel_last_error(), cases[i].substring));
    assert_null(exe);
    free(image);
  }
}

// An executable whose code exists only for another target is refused with
// the targets it has; a kernel whose symbol the code lacks is a format
// error.
static void test_executable_load_needs_code_for_the_device_target(
    void **state) {
  test_env_t *env = *state;
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = "k"};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  static const char ptx[] = ".version 8.0\n.target sm_90\n";
  assert_accel_ok(accel_exe_builder_add_code(b, "cuda-sm_90",
                                             ACCEL_CODE_FORMAT_PTX, ptx,
                                             sizeof(ptx)));
  uint64_t size;
  void *image = build_image(b, &size);
  accel_executable_t *exe = NULL;
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   image, size, 0, &exe),
                      ACCEL_ERROR_UNSUPPORTED);
  assert_non_null(strstr(accel_last_error(), "cuda-sm_90"));
  free(image);

  assert_accel_ok(accel_exe_builder_create(&b));
  k.name = "missing_symbol";
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  assert_accel_ok(accel_exe_builder_add_code(
      b, g_target, ACCEL_CODE_FORMAT_ELF_SO, g_so, g_so_size));
  image = build_image(b, &size);
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   image, size, 0, &exe),
                      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "missing_symbol"));
  free(image);

  // Bytes that are not an ELF object are refused before dlopen.
  assert_accel_ok(accel_exe_builder_create(&b));
  k.name = "k";
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  assert_accel_ok(accel_exe_builder_add_code(
      b, g_target, ACCEL_CODE_FORMAT_ELF_SO, ptx, sizeof(ptx)));
  image = build_image(b, &size);
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   image, size, 0, &exe),
                      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "not an ELF"));
  assert_null(exe);
  free(image);
}

// An image whose one kernel is |symbol| in the code object |so|.
static void *image_with_code(const char *symbol, const void *so,
                             uint64_t so_size, uint64_t *out_size) {
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = "k",
                               .symbol = symbol};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  assert_accel_ok(accel_exe_builder_add_code(
      b, g_target, ACCEL_CODE_FORMAT_ELF_SO, so, so_size));
  return build_image(b, out_size);
}

// A code object whose kernel symbol is missing from its dynamic symbol table
// is refused before dlopen: its ELF constructor never runs.
static void test_executable_load_refuses_missing_symbol_before_running_code(
    void **state) {
  test_env_t *env = *state;
  uint64_t so_size, size;
  void *so = test_read_file(getenv("ACCEL_TEST_CODE_OBJECT"), &so_size);
  unsetenv("ACCEL_TEST_CTOR_MARKER");
  void *image = image_with_code("absent", so, so_size, &size);
  accel_executable_t *exe = NULL;
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   image, size, 0, &exe),
                      ACCEL_ERROR_FORMAT);
  assert_null(getenv("ACCEL_TEST_CTOR_MARKER"));
  assert_non_null(strstr(accel_last_error(), "\"absent\""));
  assert_non_null(strstr(accel_last_error(), "dynamic symbol table"));
  assert_null(exe);
  free(image);

  // The same object with a kernel it defines loads (and so runs its code).
  image = image_with_code("present", so, so_size, &size);
  assert_accel_ok(accel_executable_load_memory(env->runtime, env->device,
                                               image, size, 0, &exe));
  assert_non_null(getenv("ACCEL_TEST_CTOR_MARKER"));
  accel_executable_release(exe);
  unsetenv("ACCEL_TEST_CTOR_MARKER");
  free(image);
  free(so);
}

// A library descriptor with a short struct_size, or an export table that
// repeats a name, is refused at load with FORMAT naming the defect.
// Loading |image| fails with ACCEL_ERROR_FORMAT, a message holding |why|,
// and no executable.
static void expect_format_refusal(test_env_t *env, const void *image,
                                  uint64_t size, const char *why) {
  accel_executable_t *exe = NULL;
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   image, size, 0, &exe),
                      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), why));
  assert_null(exe);
}

static void test_executable_load_refuses_short_library_and_repeated_export(
    void **state) {
  test_env_t *env = *state;
  static const struct {
    const char *defect;
    const char *why;
  } cases[] = {
      {"short_struct", "struct_size 40 is below 48"},
      {"repeated_export", "export name \"present\" appears more than once"},
  };
  uint64_t so_size, size;
  void *so = test_read_file(getenv("ACCEL_TEST_CODE_OBJECT"), &so_size);
  void *image = image_with_code("present", so, so_size, &size);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    setenv("ACCEL_TEST_LIBRARY_DEFECT", cases[i].defect, 1);
    expect_format_refusal(env, image, size, cases[i].why);
  }
  unsetenv("ACCEL_TEST_LIBRARY_DEFECT");
  unsetenv("ACCEL_TEST_CTOR_MARKER");
  free(image);
  free(so);
}

// ELF objects of another class, machine or type are refused before dlopen,
// each with a message naming the field.
static void test_executable_load_refuses_wrong_elf_header_before_dlopen(
    void **state) {
  test_env_t *env = *state;
  static const struct {
    size_t at;     // byte offset in the ELF header
    uint8_t value;
    const char *why;
  } cases[] = {
      {4, 1, "ELF class 1"},            // EI_CLASS: ELFCLASS32
      {18, 0x28, "ELF machine 40"},     // e_machine: EM_ARM
      {16, 2, "ELF type 2"},            // e_type: ET_EXEC
      {58, 7, "e_shentsize 7"},         // e_shentsize
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    uint8_t *so = malloc(g_so_size);
    memcpy(so, g_so, g_so_size);
    so[cases[i].at] = cases[i].value;
    if (cases[i].at == 18 || cases[i].at == 16 || cases[i].at == 58) {
      so[cases[i].at + 1] = 0;
    }
    uint64_t size;
    void *image = image_with_code("empty", so, g_so_size, &size);
    expect_format_refusal(env, image, size, cases[i].why);
    free(image);
    free(so);
  }
  // Section headers beyond the end of the object are refused, not read.
  uint8_t *so = malloc(g_so_size);
  memcpy(so, g_so, g_so_size);
  uint64_t far = g_so_size - 8;
  memcpy(so + 40, &far, sizeof(far));  // e_shoff
  uint64_t size;
  void *image = image_with_code("empty", so, g_so_size, &size);
  expect_format_refusal(env, image, size, "outside");
  free(image);
  free(so);
}

// Builder misuse is refused with a message.
static void test_builder_rejects_misuse(void **state) {
  (void)state;
  accel_exe_builder_t *b;
  assert_accel_ok(accel_exe_builder_create(&b));
  accel_exe_kernel_desc_t k = {.struct_size = sizeof(k), .name = "k"};
  assert_accel_ok(accel_exe_builder_add_kernel(b, &k));
  assert_accel_status(accel_exe_builder_add_kernel(b, &k),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_kernel_binding_decl_t bad = {.access = 0};
  accel_exe_kernel_desc_t k2 = {.struct_size = sizeof(k2), .name = "k2",
                                .binding_count = 1, .bindings = &bad};
  assert_accel_status(accel_exe_builder_add_kernel(b, &k2),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  k2.struct_size = 4;
  assert_accel_status(accel_exe_builder_add_kernel(b, &k2),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  static float f[4];
  accel_exe_weight_desc_t w = {.struct_size = sizeof(w)};
  w.info = (accel_weight_info_t){.struct_size = sizeof(w.info), .name = "w",
                                 .dtype = ACCEL_DTYPE_F32, .rank = 1,
                                 .shape = {5}, .host_data = f,
                                 .size_bytes = sizeof(f)};
  assert_accel_status(accel_exe_builder_add_weight(b, &w),
                      ACCEL_ERROR_INVALID_ARGUMENT);  // 5 floats != 16 bytes
  w.info.shape[0] = 4;
  w.info.dtype = 77;
  assert_accel_status(accel_exe_builder_add_weight(b, &w),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  w.info.dtype = ACCEL_DTYPE_F32;
  w.info.quant_scheme = ACCEL_QUANT_PER_TENSOR;
  w.info.quant_scale = "no_such_weight";
  assert_accel_ok(accel_exe_builder_add_weight(b, &w));
  void *image;
  uint64_t size;
  assert_accel_status(accel_exe_builder_write_memory(b, &image, &size),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(accel_last_error(), "no_such_weight"));
  assert_accel_status(accel_exe_builder_add_metadata(b, "", "v"),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_exe_builder_add_code(b, g_target, 9, f, 4),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_exe_builder_create(NULL),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  accel_exe_builder_destroy(b);
}

// Load arguments are checked.
static void test_executable_load_rejects_bad_arguments(void **state) {
  test_env_t *env = *state;
  accel_executable_t *exe = NULL;
  static uint8_t buf[256] __attribute__((aligned(64)));
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   buf + 8, 128, 0, &exe),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_executable_load_memory(env->runtime, env->device,
                                                   buf, 128, 1u << 9, &exe),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_accel_status(accel_executable_load_file(env->runtime, env->device,
                                                 "/nonexistent/x.axe", 0, &exe),
                      ACCEL_ERROR_NOT_FOUND);
  assert_accel_status(accel_executable_load_file(env->runtime, NULL, "x", 0,
                                                 &exe),
                      ACCEL_ERROR_INVALID_ARGUMENT);
  assert_null(exe);
}

// A FIFO, a directory and an 8 GiB sparse file whose header is wrong are
// refused before the rest is read: at once (the FIFO used to block forever,
// the sparse file took 17.6 s and 8.4 GB), with a message that says why
// (issue 15).
static void test_load_file_refuses_non_files_and_bad_headers_at_once(
    void **state) {
  test_env_t *env = *state;
  char dir[] = "/tmp/accel-load-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char fifo[96], big[96];
  snprintf(fifo, sizeof(fifo), "%s/pipe.axe", dir);
  snprintf(big, sizeof(big), "%s/big.axe", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  accel_executable_t *exe = NULL;
  uint64_t t0 = test_now_ns();
  assert_accel_status(
      accel_executable_load_file(env->runtime, env->device, fifo, 0, &exe),
      ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "not a regular file (a FIFO)"));
  assert_accel_status(
      accel_executable_load_file(env->runtime, env->device, dir, 0, &exe),
      ACCEL_ERROR_IO);
  assert_non_null(strstr(accel_last_error(), "a directory"));
  int fd = open(big, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "NOTANAXE", 8), 8);
  assert_int_equal(ftruncate(fd, 8ll << 30), 0);  // sparse: no disk used
  close(fd);
  assert_accel_status(
      accel_executable_load_file(env->runtime, env->device, big, 0, &exe),
      ACCEL_ERROR_FORMAT);
  assert_non_null(strstr(accel_last_error(), "not an .axe file"));
  uint64_t ms = (test_now_ns() - t0) / 1000000;
  printf("non-files and the 8 GiB bad header refused in %llu ms\n",
         (unsigned long long)ms);
  assert_true(ms < 2000);
  assert_null(exe);
  unlink(big);
  unlink(fifo);
  rmdir(dir);
}

static void write_npy(const char *path, const float *v, int n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  char header[128];
  int len = snprintf(header, sizeof(header),
                     "{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(%d, 2), }",
                     n / 2);
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  uint16_t hlen = (uint16_t)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fwrite(&hlen, 2, 1, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; ++i) {
    fputc(' ', f);
  }
  fputc('\n', f);
  fwrite(v, sizeof(float), (size_t)n, f);
  fclose(f);
}

// accel-pack builds a file from a manifest (.npy and raw weights, kernels,
// code, metadata); accel-inspect verifies and prints it; the runtime loads
// it from disk with the weights mapped.
static void test_accel_pack_and_inspect_end_to_end(void **state) {
  test_env_t *env = *state;
  char dir[] = "/tmp/accel-abi-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[512], cmd[4096];
  float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  snprintf(path, sizeof(path), "%s/w.npy", dir);
  write_npy(path, v, 8);
  snprintf(path, sizeof(path), "%s/raw.bin", dir);
  FILE *f = fopen(path, "wb");
  fwrite(v, sizeof(float), 8, f);
  fclose(f);
  snprintf(path, sizeof(path), "%s/model.manifest", dir);
  f = fopen(path, "w");
  fprintf(f,
          "# test manifest\n"
          "uuid 00112233-4455-6677-8899-aabbccddeeff\n"
          "requires caps=host_kernels workspace=4096\n"
          "metadata model tiny test model\n"
          "code %s elf %s\n"
          "kernel vector_add workgroup=256 constants=4 binding=r:a:4 "
          "binding=r:b:4 binding=w:out:4\n"
          "kernel nothing symbol=empty\n"
          "weight w file=w.npy map\n"
          "weight raw file=raw.bin dtype=f32 shape=2,4\n",
          g_target, getenv("ACCEL_TEST_HOST_KERNELS"));
  fclose(f);
  snprintf(cmd, sizeof(cmd), "%s --quiet %s -o %s/model.axe",
           getenv("ACCEL_PACK"), path, dir);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof(cmd), "%s --json %s/model.axe > %s/inspect.json",
           getenv("ACCEL_INSPECT"), dir, dir);
  assert_int_equal(system(cmd), 0);
  snprintf(path, sizeof(path), "%s/inspect.json", dir);
  uint64_t n;
  char *json = test_read_file(path, &n);
  json = realloc(json, n + 1);
  json[n] = '\0';
  assert_non_null(strstr(json, "\"valid\": true"));
  assert_non_null(strstr(json, "\"uuid\": \"00112233-4455-6677-8899-aabbccddeeff\""));
  assert_non_null(strstr(json, "\"name\": \"vector_add\""));
  assert_non_null(strstr(json, "\"shape\": [4,2]"));
  assert_non_null(strstr(json, "\"model\": \"tiny test model\""));
  free(json);

  snprintf(path, sizeof(path), "%s/model.axe", dir);
  accel_executable_t *exe;
  assert_accel_ok(accel_executable_load_file(env->runtime, env->device, path,
                                             ACCEL_EXECUTABLE_LOAD_EAGER_WEIGHTS,
                                             &exe));
  accel_weight_info_t wi = {.struct_size = sizeof(wi)};
  assert_accel_ok(accel_executable_weight(exe, "w", &wi));
  assert_int_equal(wi.rank, 2);
  assert_int_equal(wi.shape[0], 4);
  assert_memory_equal(wi.host_data, v, sizeof(v));
  assert_int_equal((uintptr_t)wi.host_data % 4096, 0);
  accel_buffer_t *wb;
  assert_accel_ok(accel_executable_weight_buffer(exe, "raw", &wb));
  void *p;
  assert_accel_ok(accel_buffer_host_pointer(wb, &p));
  assert_memory_equal(p, v, sizeof(v));
  assert_int_equal(accel_buffer_size(wb), sizeof(v));
  accel_executable_release(exe);
  // The weight buffer keeps the mapping alive.
  assert_memory_equal(p, v, sizeof(v));
  accel_buffer_release(wb);

  // A corrupted copy fails inspection with the loader's message.
  snprintf(cmd, sizeof(cmd),
           "cp %s/model.axe %s/bad.axe && printf 'X' | dd of=%s/bad.axe bs=1 "
           "seek=5000 conv=notrunc 2>/dev/null && %s %s/bad.axe 2>%s/err.txt",
           dir, dir, dir, getenv("ACCEL_INSPECT"), dir, dir);
  assert_int_equal(WEXITSTATUS(system(cmd)), 1);
  snprintf(path, sizeof(path), "%s/err.txt", dir);
  char *err = test_read_file(path, &n);
  err = realloc(err, n + 1);
  err[n] = '\0';
  assert_non_null(strstr(err, "not valid"));
  free(err);
  // A manifest error names the line.
  snprintf(path, sizeof(path), "%s/bad.manifest", dir);
  f = fopen(path, "w");
  fprintf(f, "kernel k binding=x:y\n");
  fclose(f);
  snprintf(cmd, sizeof(cmd), "%s %s -o %s/x.axe 2>%s/err.txt",
           getenv("ACCEL_PACK"), path, dir, dir);
  assert_int_equal(WEXITSTATUS(system(cmd)), 1);
  snprintf(path, sizeof(path), "%s/err.txt", dir);
  err = test_read_file(path, &n);
  err = realloc(err, n + 1);
  err[n] = '\0';
  assert_non_null(strstr(err, "bad.manifest:1"));
  free(err);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static int group_setup(void **state) {
  g_so = test_read_file(getenv("ACCEL_TEST_HOST_KERNELS"), &g_so_size);
  int rc = test_env_setup(state);
  test_env_t *env = *state;
  accel_device_info_t info = {.struct_size = sizeof(info)};
  accel_device_info(env->device, &info);
  snprintf(g_target, sizeof(g_target), "%s", info.target);
  return rc;
}

static int group_teardown(void **state) {
  free(g_so);
  return test_env_teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builder_round_trip_every_section_kind_and_dtype),
      cmocka_unit_test(
          test_executable_skips_optional_and_refuses_required_unknown),
      cmocka_unit_test(test_executable_load_checks_requirements),
      cmocka_unit_test(test_executable_load_needs_code_for_the_device_target),
      cmocka_unit_test(
          test_executable_load_refuses_missing_symbol_before_running_code),
      cmocka_unit_test(
          test_executable_load_refuses_wrong_elf_header_before_dlopen),
      cmocka_unit_test(
          test_executable_load_refuses_short_library_and_repeated_export),
      cmocka_unit_test(test_builder_rejects_misuse),
      cmocka_unit_test(test_load_file_refuses_non_files_and_bad_headers_at_once),
      cmocka_unit_test(test_executable_load_rejects_bad_arguments),
      cmocka_unit_test(test_accel_pack_and_inspect_end_to_end),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
