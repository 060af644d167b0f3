// The f32 elementary functions of the reference kernels, with the exact
// operation sequence kernels/README.md specifies ("exp, GELU and SiLU in
// f32"), shared by the host kernels (kernel_util.h, built with
// -ffp-contract=off) and the CUDA kernels (kernels/cuda, built with
// -fmad=false), so that both round the same operations in the same order.
// KP_MATH_FN is how a function is declared: static inline for C,
// __device__ __forceinline__ for CUDA.
#ifndef ACCEL_KERNELS_HOST_KP_MATH_H_
#define ACCEL_KERNELS_HOST_KP_MATH_H_

#include <math.h>
#include <stdint.h>

#ifndef KP_MATH_FN
#define KP_MATH_FN static inline
#endif

typedef union kp_bits {
  float f;
  int32_t i;
  uint32_t u;
} kp_bits_t;

// exp(x) in f32 with this exact sequence (about 2 ulp): x above 88.7228
// gives +inf, below -87.33 gives 0, NaN stays NaN; otherwise n = round-to-nearest-even(x * log2 e)
// (by adding and subtracting 1.5 * 2^23), r = (x - n * ln2_hi) - n * ln2_lo,
// p = the degree-6 Taylor polynomial of exp(r) by Horner from 1/720, and
// the result p * 2^n with 2^n built from exponent bits (p * 2^(n-1) * 2 for
// n > 0).
KP_MATH_FN float kp_expf(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  // NaN computes with 0 (its result is replaced by x below): a NaN n would
  // make the int conversion and the exponent shift undefined.
  float xc = x != x         ? 0.0f
             : x < -87.33f   ? -87.33f
             : x > 88.7228f  ? 88.7228f
                             : x;
  float n = (xc * 1.44269504f + magic) - magic;
  float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n for n up to 128: 2^(n - 1) * 2 when n > 0, so that the scale stays
  // a finite f32.
  int32_t k = (int32_t)n;
  kp_bits_t scale;
  scale.i = ((k > 0 ? k - 1 : k) + 127) << 23;
  float y = p * scale.f;
  y = k > 0 ? y * 2.0f : y;
  y = x < -87.33f ? 0.0f : y;
  y = x > 88.7228f ? INFINITY : y;
  return x != x ? x : y;
}

// GELU with the tanh approximation: tanh(u) = 1 - 2 / (exp(2u) + 1).
KP_MATH_FN float kp_gelu_tanh(float v) {
  float u = 0.7978845608f * (v + 0.044715f * (v * v * v));
  float t = 1.0f - 2.0f / (kp_expf(2.0f * u) + 1.0f);
  return 0.5f * v * (1.0f + t);
}

// SiLU: v / (1 + exp(-v)).
KP_MATH_FN float kp_silu(float v) {
  return v / (1.0f + kp_expf(-v));
}

// GELU with erf: 0.5 v (1 + erff(v * 0.70710678)), erff from the C library.
KP_MATH_FN float kp_gelu_erf(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678f));
}

// The rotation of pair p at position pos (cos and sin, rounded to f32).
KP_MATH_FN void kp_rope_angle(float base, uint32_t p, uint32_t rd, int32_t pos,
                              float *cs, float *sn) {
  double inv_freq = pow((double)base, -(double)(2u * p) / (double)rd);
  double angle = (double)pos * inv_freq;
  *cs = (float)cos(angle);
  *sn = (float)sin(angle);
}

// Rotates elements i0 and i1 of every head of |tok| by (cs, sn).
KP_MATH_FN void kp_rope_rotate(float *tok, uint32_t heads, uint32_t head_dim,
                               float cs, float sn, uint32_t i0, uint32_t i1) {
  for (uint32_t h = 0; h < heads; ++h) {
    float *head = tok + (uint64_t)h * head_dim;
    float a = head[i0], b = head[i1];
    head[i0] = a * cs - b * sn;
    head[i1] = a * sn + b * cs;
  }
}

// Rotary embedding of pair |p| (of rotary_dim |rd|, theta base |base|) at
// position |pos|: theta in double, cos and sin rounded to f32, then
// a' = a c - b s, b' = a s + b c in f32, for |heads| heads |head_dim| apart
// whose pair elements are |i0| and |i1|.
KP_MATH_FN void kp_rope_pair(float *tok, uint32_t heads, uint32_t head_dim,
                             float base, uint32_t p, uint32_t rd, int32_t pos,
                             uint32_t i0, uint32_t i1) {
  float cs, sn;
  kp_rope_angle(base, p, rd, pos, &cs, &sn);
  kp_rope_rotate(tok, heads, head_dim, cs, sn, i0, i1);
}

// 1 when (va, ia) ranks before (vb, ib) in the selection kernels' ranking:
// larger value first, numbers before NaN, lower index first on ties.
KP_MATH_FN int kp_ranks_before(float va, int64_t ia, float vb, int64_t ib) {
  int na = va != va, nb = vb != vb;
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

#endif  // ACCEL_KERNELS_HOST_KP_MATH_H_
