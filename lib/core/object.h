// Reference counting shared by every ref-counted object (buffers, events,
// semaphores, executables). An object embeds accel_object_t first; commands in
// flight hold references through it without knowing the concrete type.
#ifndef ACCEL_CORE_OBJECT_H_
#define ACCEL_CORE_OBJECT_H_

#include <stdatomic.h>
#include <stdint.h>

typedef struct accel_object accel_object_t;
typedef void (*accel_object_destroy_fn_t)(accel_object_t *object);

struct accel_object {
  _Atomic uint32_t ref_count;
  accel_object_destroy_fn_t destroy;
};

static inline void accel_object_init(accel_object_t *object,
                                     accel_object_destroy_fn_t destroy) {
  atomic_init(&object->ref_count, 1);
  object->destroy = destroy;
}

static inline void accel_object_retain(accel_object_t *object) {
  // Relaxed: a new reference is made from an existing one, which already
  // orders the object's construction before this point.
  atomic_fetch_add_explicit(&object->ref_count, 1, memory_order_relaxed);
}

static inline void accel_object_release(accel_object_t *object) {
  if (object == NULL) {
    return;
  }
  // Acq_rel: the last releaser must see every write made by other holders
  // before they released.
  if (atomic_fetch_sub_explicit(&object->ref_count, 1,
                                memory_order_acq_rel) == 1) {
    object->destroy(object);
  }
}

#endif  // ACCEL_CORE_OBJECT_H_
