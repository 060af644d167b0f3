// accel_get_api: the one static table of the C shim
// (include/accel/api_table.h).
#include "accel/api_table.h"

#include "core/error.h"

#define ACCEL_API_TABLE_INIT_(fn) .fn = fn,

static const accel_api_t k_api = {
    .struct_size = sizeof(accel_api_t),
    .api_version = (ACCEL_API_VERSION_MAJOR << 16) | ACCEL_API_VERSION_MINOR,
    ACCEL_API_ENTRIES(ACCEL_API_TABLE_INIT_)};

const accel_api_t *accel_get_api(uint32_t major, uint32_t minor) {
  if (major != ACCEL_API_VERSION_MAJOR || minor > ACCEL_API_VERSION_MINOR) {
    accel_error(ACCEL_ERROR_VERSION,
                "accel_get_api: version %u.%u was asked for; this library "
                "implements %d.0 to %d.%d",
                major, minor, ACCEL_API_VERSION_MAJOR, ACCEL_API_VERSION_MAJOR,
                ACCEL_API_VERSION_MINOR);
    return NULL;
  }
  return &k_api;
}
