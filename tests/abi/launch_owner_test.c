// Launch owners (lib/abi/launch_owner.h): the object is destroyed exactly
// once, after the last user reference and the last launch, whatever the
// order, including across launch-budget blocks.
#include <stdlib.h>

#include "test_support.h"
#include "abi/launch_owner.h"

static int g_destroyed;

static void count_destroy(accel_object_t *object) {
  (void)object;
  g_destroyed++;
}

static void run(uint64_t launches, uint64_t completed_before_release) {
  accel_launch_owner_t *o = aligned_alloc(64, sizeof(*o));
  accel_launch_owner_init(o, count_destroy);
  g_destroyed = 0;
  accel_launch_owner_retain(o);  // a second user
  for (uint64_t i = 0; i < launches; ++i) {
    assert_ptr_equal(accel_launch_owner_take(o), &o->object);
  }
  for (uint64_t i = 0; i < completed_before_release; ++i) {
    accel_object_release(&o->object);
  }
  accel_launch_owner_release(o);
  assert_int_equal(g_destroyed, 0);
  accel_launch_owner_release(o);
  assert_int_equal(g_destroyed, launches == completed_before_release);
  for (uint64_t i = completed_before_release; i < launches; ++i) {
    assert_int_equal(g_destroyed, 0);
    accel_object_release(&o->object);
  }
  assert_int_equal(g_destroyed, 1);
  free(o);
}

// No launches, launches all complete before the release, some after, and
// counts on both sides of a budget block boundary.
static void test_launch_owner_destroys_once_after_users_and_launches(
    void **state) {
  (void)state;
  run(0, 0);
  run(1, 1);
  run(1, 0);
  run(5, 2);
  run(ACCEL_LAUNCH_BUDGET, ACCEL_LAUNCH_BUDGET - 1);
  run(ACCEL_LAUNCH_BUDGET, ACCEL_LAUNCH_BUDGET);
  run(ACCEL_LAUNCH_BUDGET + 1, 3);
  run(2ull * ACCEL_LAUNCH_BUDGET + 7, 2ull * ACCEL_LAUNCH_BUDGET + 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launch_owner_destroys_once_after_users_and_launches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
