// reference.axe (kernels/axe): the build's executable of every reference
// kernel loads on the host device, holds exactly the kernels the families
// declare, and accel-inspect lists each of them.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_params.h"
#include "kernel_list.h"
#include "test_support.h"

#define NAME(k) #k,
static const char *const k_expected[] = {
    ACCEL_KP_MATMUL_KERNELS(NAME) ACCEL_KP_QUANT_KERNELS(NAME)
    ACCEL_KP_GGUF_KERNELS(NAME)
    ACCEL_KP_ROW_KERNELS(NAME) ACCEL_KP_ELTWISE_KERNELS(NAME)
    ACCEL_KP_SELECT_KERNELS(NAME) ACCEL_KP_ATTENTION_KERNELS(NAME)};
#define EXPECTED_COUNT (sizeof(k_expected) / sizeof(k_expected[0]))

// It loads, and its kernel table is exactly the families' kernel lists, each
// name resolving to a kernel with the declared bindings.
static void test_reference_axe_loads_with_every_kernel(void **state) {
  test_env_t *env = *state;
  accel_executable_t *exe = NULL;
  assert_accel_ok(accel_executable_load_file(
      env->runtime, env->device, getenv("ACCEL_TEST_REFERENCE_AXE"), 0, &exe));
  accel_executable_info_t info = {.struct_size = sizeof(info)};
  assert_accel_ok(accel_executable_info(exe, &info));
  assert_int_equal(info.kernel_count, EXPECTED_COUNT);
  for (size_t i = 0; i < EXPECTED_COUNT; ++i) {
    accel_kernel_t *k = NULL;
    assert_accel_ok(accel_executable_kernel(exe, k_expected[i], &k));
    accel_kernel_info_t ki = {.struct_size = sizeof(ki)};
    assert_accel_ok(accel_kernel_info(k, &ki));
    assert_true(ki.binding_count > 0);
    // 8-bit activations: declared by exactly the GGUF block kernels, and
    // 16-bit ones by q8_0 and q4_0 (what the serving engine reads to use
    // them).
    const char *name = k_expected[i];
    bool block = strncmp(name, "qmatmul_q", 9) == 0;
    bool i16 = strcmp(name, "qmatmul_q8_0") == 0 ||
               strcmp(name, "qmatmul_q4_0") == 0;
    assert_int_equal(ki.features,
                     (block ? ACCEL_KP_FEATURE_Q8_ACTIVATIONS : 0u) |
                         (i16 ? ACCEL_KP_FEATURE_I16_ACTIVATIONS : 0u));
    assert_int_equal(ki.reserved1, 0);
  }
  const char *value = NULL;
  assert_accel_ok(accel_executable_metadata(exe, "name", &value));
  assert_string_equal(value, "accel reference kernels");
  accel_executable_release(exe);
}

// accel-inspect validates it (hashes included) and names every kernel.
static void test_accel_inspect_lists_every_kernel(void **state) {
  (void)state;
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "'%s' '%s'", getenv("ACCEL_INSPECT"),
           getenv("ACCEL_TEST_REFERENCE_AXE"));
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char out[1 << 16];
  size_t n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = '\0';
  assert_int_equal(pclose(p), 0);
  assert_non_null(strstr(out, "all section hashes match"));
  for (size_t i = 0; i < EXPECTED_COUNT; ++i) {
    char line[128];
    snprintf(line, sizeof(line), "  %s (symbol %s,", k_expected[i],
             k_expected[i]);
    if (strstr(out, line) == NULL) {
      fail_msg("accel-inspect does not list %s:\n%s", k_expected[i], out);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_axe_loads_with_every_kernel),
      cmocka_unit_test(test_accel_inspect_lists_every_kernel),
  };
  return cmocka_run_group_tests(tests, test_env_setup, test_env_teardown);
}
