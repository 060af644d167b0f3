// libaccel_kernels.so: every reference kernel in one host code object (an
// .axe file holds one code object per target, so reference.axe packs this
// one). The families' sources are compiled into it with ACCEL_KP_COMBINED,
// which leaves out their own library tables.
#include "attention_params.h"
#include "kernel_list.h"

ACCEL_KP_ATTENTION_KERNELS(ACCEL_KP_DECLARE)

void openblas_set_num_threads(int num_threads);

// One OpenBLAS thread per call: the host device spreads work-groups over its
// own threads, and a fixed thread count keeps matmul's blocking fixed.
static int32_t library_init(void) {
  openblas_set_num_threads(1);
  return 0;
}

static const accel_kernel_export_t k_exports[] = {
    ACCEL_KP_MATMUL_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_QUANT_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_GGUF_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_ROW_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_ELTWISE_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_SELECT_KERNELS(ACCEL_KP_EXPORT)
    ACCEL_KP_ATTENTION_KERNELS(ACCEL_KP_EXPORT)
};

ACCEL_KP_DEFINE_LIBRARY("accel reference kernels", k_exports, library_init,
                        ACCEL_KP_META_ALL)
