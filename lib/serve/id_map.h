// A map from 64-bit ids to pointers for lib/serve (sequences of the KV
// cache, requests of the scheduler): open addressing with linear probing,
// kept at most half full, deletion by backward shift (no tombstones).
#ifndef ACCEL_SERVE_ID_MAP_H_
#define ACCEL_SERVE_ID_MAP_H_

#include <stdint.h>

#include "accel/base.h"

typedef struct serve_id_map {
  uint64_t *keys;
  void **values;  // NULL: empty slot
  uint32_t mask;
  uint32_t count;
} serve_id_map_t;

// An empty map. ACCEL_ERROR_OUT_OF_MEMORY.
accel_status_t serve_id_map_init(serve_id_map_t *map);
// Frees the map's tables (not the values).
void serve_id_map_fini(serve_id_map_t *map);
// The value of |id|, or NULL.
void *serve_id_map_find(const serve_id_map_t *map, uint64_t id);
// Makes room for one more entry (call before insert, so that insert cannot
// fail). ACCEL_ERROR_OUT_OF_MEMORY.
accel_status_t serve_id_map_reserve(serve_id_map_t *map);
// Inserts |id| (absent) with |value| (not NULL); reserve came first.
void serve_id_map_insert(serve_id_map_t *map, uint64_t id, void *value);
// Removes |id| (present).
void serve_id_map_remove(serve_id_map_t *map, uint64_t id);

#endif  // ACCEL_SERVE_ID_MAP_H_
