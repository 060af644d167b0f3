// Numerics checks and tensor summaries over what a kernel wrote. Elements
// are read by their declared type (kernel ABI 1.2 binding types); opaque
// bindings are never read. The scans run on the queue worker after the
// grid completed, so they see every work-group's writes.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "abi/numerics.h"
#include "core/error.h"
#include "trace/trace_hooks.h"

static uint32_t elem_size(uint32_t type) {
  switch (type) {
    case ACCEL_KERNEL_ELEM_F32:
    case ACCEL_KERNEL_ELEM_I32:
      return 4;
    case ACCEL_KERNEL_ELEM_F16:
    case ACCEL_KERNEL_ELEM_BF16:
      return 2;
    default:
      return 0;
  }
}

static bool is_float(uint32_t type) {
  return type == ACCEL_KERNEL_ELEM_F32 || type == ACCEL_KERNEL_ELEM_F16 ||
         type == ACCEL_KERNEL_ELEM_BF16;
}

static uint32_t binding_type(const accel_kernel_t *k, uint32_t i) {
  const accel_kernel_meta_t *m = k->meta;
  return m != NULL && i < m->binding_count ? m->binding_types[i]
                                           : ACCEL_KERNEL_ELEM_OPAQUE;
}

// Element |i| of |data| (of |type|) widened to double.
static double elem_value(const uint8_t *data, uint32_t type, uint64_t i) {
  switch (type) {
    case ACCEL_KERNEL_ELEM_F32: {
      float f;
      memcpy(&f, data + 4 * i, 4);
      return f;
    }
    case ACCEL_KERNEL_ELEM_I32: {
      int32_t v;
      memcpy(&v, data + 4 * i, 4);
      return v;
    }
    case ACCEL_KERNEL_ELEM_BF16: {
      uint16_t h;
      memcpy(&h, data + 2 * i, 2);
      uint32_t bits = (uint32_t)h << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    case ACCEL_KERNEL_ELEM_F16: {
      uint16_t h;
      memcpy(&h, data + 2 * i, 2);
      uint32_t e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
      double v = e == 0x1f ? (mant ? NAN : INFINITY)
                 : e == 0  ? ldexp(mant, -24)
                           : ldexp(mant | 0x400u, (int)e - 25);
      return (h & 0x8000u) ? -v : v;
    }
    default:
      return 0;
  }
}

// Index of the first element of |n| that is NaN or infinite, or |n|.
static uint64_t first_non_finite(const uint8_t *data, uint32_t type,
                                 uint64_t n) {
  if (type == ACCEL_KERNEL_ELEM_F32) {
    // Bits, not isfinite(): the loop vectorizes and needs no FP state.
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t bits;
      memcpy(&bits, data + 4 * i, 4);
      if ((bits & 0x7f800000u) == 0x7f800000u) {
        return i;
      }
    }
    return n;
  }
  uint16_t exp_mask = type == ACCEL_KERNEL_ELEM_F16 ? 0x7c00u : 0x7f80u;
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    memcpy(&h, data + 2 * i, 2);
    if ((h & exp_mask) == exp_mask) {
      return i;
    }
  }
  return n;
}

static const char *binding_name(const accel_kernel_t *k, uint32_t i) {
  const char *n = k->bindings[i].name;
  return n != NULL ? n : "";
}

// Appends the state of |k|'s inputs (read-only bindings) to |out|.
static void describe_inputs(const accel_kernel_t *k,
                            const accel_kernel_dispatch_t *d, char *out,
                            size_t size) {
  size_t used = strlen(out);
  const char *sep = "; inputs:";
  for (uint32_t i = 0; i < d->binding_count && used < size; ++i) {
    const accel_kernel_binding_t *b = &d->bindings[i];
    if ((b->access & ACCEL_KERNEL_ACCESS_WRITE) != 0) {
      continue;
    }
    uint32_t type = binding_type(k, i);
    int w;
    if (!is_float(type)) {
      w = snprintf(out + used, size - used, "%s binding %u (%s) not checked "
                   "(%s)", sep, i, binding_name(k, i),
                   type == ACCEL_KERNEL_ELEM_I32 ? "integers" : "opaque");
    } else {
      uint64_t n = b->size_bytes / elem_size(type);
      uint64_t at = first_non_finite(b->data, type, n);
      if (at == n) {
        w = snprintf(out + used, size - used, "%s binding %u (%s) finite",
                     sep, i, binding_name(k, i));
      } else {
        w = snprintf(out + used, size - used,
                     "%s binding %u (%s) not finite (%g at element %llu)",
                     sep, i, binding_name(k, i),
                     elem_value(b->data, type, at), (unsigned long long)at);
      }
    }
    sep = ",";
    used += w > 0 ? (size_t)w : 0;
  }
}

accel_status_t accel_numerics_check(const accel_kernel_t *k,
                                    const accel_kernel_dispatch_t *d) {
  for (uint32_t i = 0; i < d->binding_count; ++i) {
    const accel_kernel_binding_t *b = &d->bindings[i];
    uint32_t type = binding_type(k, i);
    if ((b->access & ACCEL_KERNEL_ACCESS_WRITE) == 0 || !is_float(type)) {
      continue;
    }
    uint64_t n = b->size_bytes / elem_size(type);
    uint64_t at = first_non_finite(b->data, type, n);
    if (at == n) {
      continue;
    }
    double v = elem_value(b->data, type, at);
    char text[1024];
    snprintf(text, sizeof(text),
             "numerics check: kernel \"%s\" wrote %s to binding %u (%s) at "
             "element %llu of %llu",
             k->name, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", i,
             binding_name(k, i), (unsigned long long)at,
             (unsigned long long)n);
    describe_inputs(k, d, text, sizeof(text));
    return accel_error(ACCEL_ERROR_ABORTED, "%s", text);
  }
  return ACCEL_OK;
}

void accel_numerics_summarize(const accel_kernel_t *k,
                              const accel_kernel_dispatch_t *d) {
  if (!accel_trace_tensor_summary_wanted()) {
    return;
  }
  for (uint32_t i = 0; i < d->binding_count; ++i) {
    const accel_kernel_binding_t *b = &d->bindings[i];
    uint32_t type = binding_type(k, i);
    if ((b->access & ACCEL_KERNEL_ACCESS_WRITE) == 0 || elem_size(type) == 0) {
      continue;
    }
    uint64_t n = b->size_bytes / elem_size(type);
    uint64_t nan = 0, inf = 0, finite = 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (uint64_t e = 0; e < n; ++e) {
      double v = elem_value(b->data, type, e);
      if (isnan(v)) {
        ++nan;
      } else if (isinf(v)) {
        ++inf;
      } else {
        ++finite;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
      }
    }
    accel_trace_tensor_summary_t summary = {
        .kernel = k->name,
        .name = binding_name(k, i),
        .binding = i,
        .count = n,
        .nan = nan,
        .inf = inf,
        .min = finite ? lo : 0.0,
        .max = finite ? hi : 0.0,
        .mean = finite ? sum / (double)finite : 0.0,
    };
    accel_trace_tensor_summary(&summary);
  }
}
