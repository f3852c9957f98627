/* Branch-free FP8 encoding and row helpers for the CPU backend's fast quantizers and
 * dequantizers (cpu_quant_fast.c, cpu_dequant.c).
 *
 * gln_cpu_fp8_encode gives the same code as the reference encoder gln_fp8_encode
 * (src/numerics/numerics.h) for every one of the 2^32 FP32 inputs (checked exhaustively for
 * E4M3 and E5M2 when this was written), but without branches, so GCC vectorizes loops of it:
 *   - normal FP8 range: rebias the exponent and round the mantissa with the "add half minus one
 *     plus the lowest kept bit" trick (the bf16 one); Inf and large values saturate through
 *     the clamp to the largest finite code;
 *   - FP8 subnormal range: |x| · 2^(bias+mbits-1) is exact (power of two) and below 2^mbits,
 *     and adding 2^23 rounds it to an integer to nearest even (IEEE default rounding, which
 *     the library never changes);
 *   - NaN gives sign | 0x7F. */
#ifndef GLN_BACKEND_CPU_FP8_H
#define GLN_BACKEND_CPU_FP8_H

#include <stdint.h>
#include <string.h>

#include "grouplin.h"

/* All-ones when `cond` holds, else 0: selects written as masks, which GCC's vectorizer takes
 * (ternaries here stay branches).  Compared values are below 2^31, so signed compares (the
 * only ones SSE2 has) are exact. */
static inline uint32_t gln_cpu_mask(int cond) { return (uint32_t)0 - (uint32_t)(cond != 0); }

static inline uint32_t gln_cpu_select(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }

static inline uint8_t gln_cpu_fp8_encode_fmt(float x, uint32_t mbits, uint32_t bias, uint32_t maxcode,
                                             float sub_mult) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7FFFFFFFu;
    /* normal range (valid when a >= (128 - bias) << 23; garbage otherwise, then not selected) */
    const uint32_t s = 23u - mbits;
    const uint32_t h = a - ((127u - bias) << 23);
    uint32_t qn = (h + ((1u << (s - 1)) - 1u) + ((h >> s) & 1u)) >> s; /* < 2^12 */
    qn = gln_cpu_select(gln_cpu_mask((int32_t)qn > (int32_t)maxcode), maxcode, qn);
    /* subnormal range: RNE of |x| / 2^(1-bias-mbits) */
    float f;
    memcpy(&f, &a, sizeof f);
    const float t = f * sub_mult + 8388608.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const uint32_t qs = tb - 0x4B000000u;
    uint32_t code = gln_cpu_select(gln_cpu_mask((int32_t)a >= (int32_t)((128u - bias) << 23)), qn, qs);
    code = gln_cpu_select(gln_cpu_mask((int32_t)a > (int32_t)0x7F800000), 0x7Fu, code);
    return (uint8_t)(sign | code);
}

/* FP8 -> FP32, the value of the reference decoder gln_fp8_decode bit for bit (all 256 codes of
 * both formats checked), branch-free: the exponent and mantissa fields placed at the top of an
 * FP32 pattern read as a number 2^(127 - bias) too small (FP8 subnormals land on FP32
 * subnormals), times 2^(127 - bias), exact; the special codes selected in. */
static inline float gln_cpu_fp8_decode_fmt(uint8_t b, uint32_t mbits, float rebias, uint32_t special_min) {
    const uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    const uint32_t em = b & 0x7Fu;
    const uint32_t placed = em << (23u - mbits);
    float f;
    memcpy(&f, &placed, sizeof f);
    f *= rebias;
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    /* E4M3: only 0x7F is special (NaN).  E5M2: 0x7C is Inf, 0x7D-0x7F NaN. */
    const uint32_t special = gln_cpu_select(gln_cpu_mask(em == 0x7Cu), 0x7F800000u, 0x7FC00000u);
    v = gln_cpu_select(gln_cpu_mask((int32_t)em >= (int32_t)special_min), special, v);
    v |= sign;
    memcpy(&f, &v, sizeof f);
    return f;
}

static inline float gln_cpu_e4m3_decode(uint8_t b) { return gln_cpu_fp8_decode_fmt(b, 3, 0x1p120f, 0x7Fu); }
static inline float gln_cpu_e5m2_decode(uint8_t b) { return gln_cpu_fp8_decode_fmt(b, 2, 0x1p112f, 0x7Cu); }

static inline uint8_t gln_cpu_e4m3_encode(float x) { return gln_cpu_fp8_encode_fmt(x, 3, 7, 0x7Eu, 512.0f); }
static inline uint8_t gln_cpu_e5m2_encode(float x) { return gln_cpu_fp8_encode_fmt(x, 2, 15, 0x7Bu, 65536.0f); }

/* encode(x * mult) with the NaN rule of the reference quantizers pinned down: when both x and
 * mult are NaN, the product is x's NaN (its sign picks the code sign | 0x7F).  IEEE leaves
 * which NaN a product returns open; x86 returns the first operand, and the reference loops
 * compile to x · mult in that order, so the vectorized loops here say it explicitly instead
 * of depending on the operand order the vectorizer picks. */
static inline uint8_t gln_cpu_fp8_encode_scaled(float x, float mult, int e5m2) {
    const float y = x * mult;
    const uint8_t code = e5m2 ? gln_cpu_e5m2_encode(y) : gln_cpu_e4m3_encode(y);
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    const uint32_t x_nan = gln_cpu_mask((int32_t)(xb & 0x7FFFFFFFu) > (int32_t)0x7F800000);
    return (uint8_t)gln_cpu_select(x_nan, ((xb >> 24) & 0x80u) | 0x7Fu, code);
}

/* decode(b) * scale with the NaN rule of the reference dequantizer pinned down: a NaN scale
 * gives the scale's NaN whatever the value (see gln_cpu_fp8_encode_scaled on why). */
static inline float gln_cpu_fp8_dequant(uint8_t b, float scale, int e5m2) {
    float v = (e5m2 ? gln_cpu_e5m2_decode(b) : gln_cpu_e4m3_decode(b)) * scale;
    uint32_t vb, sb;
    memcpy(&vb, &v, sizeof vb);
    memcpy(&sb, &scale, sizeof sb);
    vb = gln_cpu_select(gln_cpu_mask((int32_t)(sb & 0x7FFFFFFFu) > (int32_t)0x7F800000), sb, vb);
    memcpy(&v, &vb, sizeof v);
    return v;
}

#endif
