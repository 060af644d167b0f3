// The id map of lib/serve (id_map.h).
#include "serve/id_map.h"

#include <stdbool.h>
#include <stdlib.h>
#include <xxhash.h>

#include "core/error.h"

static uint32_t home_of(uint64_t id, uint32_t mask) {
  return (uint32_t)(XXH3_64bits(&id, sizeof(id)) & mask);
}

static accel_status_t alloc_tables(serve_id_map_t *m, uint32_t cap) {
  m->keys = calloc(cap, sizeof(uint64_t));
  m->values = calloc(cap, sizeof(void *));
  if (m->keys == NULL || m->values == NULL) {
    free(m->keys);
    free(m->values);
    return accel_error(ACCEL_ERROR_OUT_OF_MEMORY,
                       "cannot allocate an id table of %u entries", cap);
  }
  m->mask = cap - 1;
  return ACCEL_OK;
}

accel_status_t serve_id_map_init(serve_id_map_t *m) {
  m->count = 0;
  return alloc_tables(m, 64);
}

void serve_id_map_fini(serve_id_map_t *m) {
  free(m->keys);
  free(m->values);
  m->keys = NULL;
  m->values = NULL;
}

void *serve_id_map_find(const serve_id_map_t *m, uint64_t id) {
  for (uint32_t i = home_of(id, m->mask);; i = (i + 1) & m->mask) {
    if (m->values[i] == NULL || m->keys[i] == id) {
      return m->values[i];
    }
  }
}

static void place(serve_id_map_t *m, uint64_t id, void *value) {
  uint32_t i = home_of(id, m->mask);
  while (m->values[i] != NULL) {
    i = (i + 1) & m->mask;
  }
  m->keys[i] = id;
  m->values[i] = value;
}

accel_status_t serve_id_map_reserve(serve_id_map_t *m) {
  if ((m->count + 1) * 2 <= m->mask + 1) {
    return ACCEL_OK;
  }
  serve_id_map_t grown = {.count = m->count};
  ACCEL_RETURN_IF_ERROR(alloc_tables(&grown, (m->mask + 1) * 2));
  for (uint32_t i = 0; i <= m->mask; ++i) {
    if (m->values[i] != NULL) {
      place(&grown, m->keys[i], m->values[i]);
    }
  }
  serve_id_map_fini(m);
  *m = grown;
  return ACCEL_OK;
}

void serve_id_map_insert(serve_id_map_t *m, uint64_t id, void *value) {
  place(m, id, value);
  m->count++;
}

void serve_id_map_remove(serve_id_map_t *m, uint64_t id) {
  uint32_t mask = m->mask;
  uint32_t i = home_of(id, mask);
  while (m->keys[i] != id || m->values[i] == NULL) {
    i = (i + 1) & mask;
  }
  m->values[i] = NULL;
  // Backward shift: an entry later in the run moves into the hole unless
  // its home lies (cyclically) after the hole and at or before it.
  for (uint32_t j = (i + 1) & mask; m->values[j] != NULL; j = (j + 1) & mask) {
    uint32_t home = home_of(m->keys[j], mask);
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      m->keys[i] = m->keys[j];
      m->values[i] = m->values[j];
      m->values[j] = NULL;
      i = j;
    }
  }
  m->count--;
}
