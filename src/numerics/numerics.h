/* Scalar numerics: conversions between FP32 and bf16 / fp16 / FP8 (E4M3, E5M2) / E8M0, and
 * the per-tensor scale rule.  Header-only so the CPU reference and (later) the CUDA kernels
 * share one definition: every function is `GLN_HD static inline`, i.e. __host__ __device__
 * under nvcc.
 *
 * All conversions work on the bit patterns (no libm, no reliance on the FPU rounding mode):
 * round to nearest even, subnormals exact, NaN kept.  FP8 encoding saturates (±Inf and values
 * beyond the finite max become ±max).  NaN encodings: bf16 / fp16 keep the sign and the top
 * payload bits (quieted); FP8 gives sign | 0x7F for both E4M3 (its only NaN) and E5M2. */
#ifndef GLN_NUMERICS_NUMERICS_H
#define GLN_NUMERICS_NUMERICS_H

#include <stdint.h>
#include <string.h>

#include "common/host_device.h"

#define GLN_FP8_E4M3_MAX 448.0f
#define GLN_FP8_E5M2_MAX 57344.0f
#define GLN_BF16_MAX     3.38953138925153547590470800371487866880e+38f /* 0x1.FEp127 */
#define GLN_FP16_MAX     65504.0f
#define GLN_FP32_MAX     3.40282346638528859811704183484516925440e+38f /* FLT_MAX */

/* ---- bit casts ---------------------------------------------------------------------------- */

GLN_HD static inline uint32_t gln_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

GLN_HD static inline float gln_f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

GLN_HD static inline int gln_f32_isnan(float x) { return (gln_f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
GLN_HD static inline int gln_f32_isinf(float x) { return (gln_f32_bits(x) & 0x7FFFFFFFu) == 0x7F800000u; }
GLN_HD static inline int gln_f32_isfinite(float x) { return (gln_f32_bits(x) & 0x7F800000u) != 0x7F800000u; }
GLN_HD static inline float gln_f32_abs(float x) { return gln_f32_from_bits(gln_f32_bits(x) & 0x7FFFFFFFu); }

/* max(a, b) for amax reductions: NaN propagates (either operand NaN gives NaN), unlike fmaxf. */
GLN_HD static inline float gln_f32_max_nan(float a, float b) {
    if (gln_f32_isnan(a)) return a;
    if (gln_f32_isnan(b)) return b;
    return a > b ? a : b;
}

/* max(a, b) for amax reductions, TE's default (fmaxf): a NaN operand is ignored, so a NaN element
 * does not poison an amax; NaN only when both are NaN.  Written out rather than fmaxf so host and
 * device agree bit for bit (no -0/+0 or NaN-payload differences between libm and CUDA). */
GLN_HD static inline float gln_f32_max_fin(float a, float b) {
    if (gln_f32_isnan(a)) return b;
    if (gln_f32_isnan(b)) return a;
    return a > b ? a : b;
}

/* The amax max selected by the `amax_nan_propagate` option (0 = ignore NaN, 1 = propagate). */
GLN_HD static inline float gln_f32_max_amax(float a, float b, int nan_propagate) {
    return nan_propagate ? gln_f32_max_nan(a, b) : gln_f32_max_fin(a, b);
}

/* Shift `m` right by `s` bits rounding to nearest even (s >= 0; s >= 32 gives 0 for m < 2^31). */
GLN_HD static inline uint32_t gln_rne_shift(uint32_t m, int s) {
    if (s <= 0) return m;
    if (s >= 32) return 0;
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

/* ---- bf16 --------------------------------------------------------------------------------- */

GLN_HD static inline uint16_t gln_f32_to_bf16_bits(float x) {
    uint32_t u = gln_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    /* Adding 0x7FFF plus the lowest kept bit rounds to nearest even; overflow carries into the
     * exponent and gives Inf, as IEEE rounding does. */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

GLN_HD static inline float gln_bf16_bits_to_f32(uint16_t b) { return gln_f32_from_bits((uint32_t)b << 16); }

/* ---- fp16 --------------------------------------------------------------------------------- */

GLN_HD static inline uint16_t gln_f32_to_fp16_bits(float x) {
    uint32_t u = gln_f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x03FFu)); /* NaN */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to Inf (RNE) */
    if (a >= 0x38800000u) {                                  /* fp16 normal: >= 2^-14 */
        uint32_t h = a - ((uint32_t)(127 - 15) << 23);       /* rebias the exponent */
        return (uint16_t)(sign | gln_rne_shift(h, 13));      /* mantissa carry bumps exponent */
    }
    /* fp16 subnormal (or zero): units of 2^-24.  value = m · 2^(E-150), so q = m >> (126 - E). */
    int e = (int)(a >> 23);
    if (e == 0) return sign; /* fp32 subnormals are far below 2^-25 */
    uint32_t m = (a & 0x007FFFFFu) | 0x00800000u;
    return (uint16_t)(sign | gln_rne_shift(m, 126 - e));
}

GLN_HD static inline float gln_fp16_bits_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x03FFu;
    if (e == 0x1Fu) return gln_f32_from_bits(sign | 0x7F800000u | (m << 13)); /* Inf / NaN */
    if (e != 0) return gln_f32_from_bits(sign | ((e + 127u - 15u) << 23) | (m << 13));
    if (m == 0) return gln_f32_from_bits(sign);
    /* subnormal: normalize m · 2^-24 */
    int shift = 0;
    while (!(m & 0x0400u)) {
        m <<= 1;
        shift++;
    }
    return gln_f32_from_bits(sign | ((uint32_t)(127 - 14 - shift) << 23) | ((m & 0x03FFu) << 13));
}

/* ---- FP8 ---------------------------------------------------------------------------------- */

/* Generic saturating RNE encoder for an FP8 format with `mbits` mantissa bits, exponent `bias`
 * and the largest finite magnitude code `maxcode`. */
GLN_HD static inline uint8_t gln_f32_to_fp8_generic(float x, int mbits, int bias, uint32_t maxcode) {
    uint32_t u = gln_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint8_t)(sign | 0x7Fu);    /* NaN */
    if (a == 0x7F800000u) return (uint8_t)(sign | maxcode); /* ±Inf saturates */
    int e = (int)(a >> 23);
    uint32_t code;
    if (e > 127 - bias) {
        /* FP8 normal range: rebias, then round the mantissa; carries bump the exponent and any
         * code beyond maxcode saturates below. Large exponents give huge codes: cap first. */
        if (e > 127 - bias + 31) return (uint8_t)(sign | maxcode);
        uint32_t h = a - ((uint32_t)(127 - bias) << 23);
        code = gln_rne_shift(h, 23 - mbits);
    } else {
        /* FP8 subnormal: units of 2^(1-bias-mbits); value = m · 2^(e-150). */
        uint32_t m = e == 0 ? (a & 0x007FFFFFu) : ((a & 0x007FFFFFu) | 0x00800000u);
        int eff = e == 0 ? 1 : e;
        code = gln_rne_shift(m, 151 - bias - mbits - eff);
    }
    if (code > maxcode) code = maxcode;
    return (uint8_t)(sign | code);
}

GLN_HD static inline uint8_t gln_f32_to_e4m3_bits(float x) { return gln_f32_to_fp8_generic(x, 3, 7, 0x7Eu); }
GLN_HD static inline uint8_t gln_f32_to_e5m2_bits(float x) { return gln_f32_to_fp8_generic(x, 2, 15, 0x7Bu); }

/* Decoder for the same generic format; `ieee` = 1 when the all-ones exponent encodes Inf/NaN
 * (E5M2), 0 for E4M3 where only S.1111.111 is NaN. */
GLN_HD static inline float gln_fp8_generic_to_f32(uint8_t b, int mbits, int bias, int ieee) {
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    int ebits = 7 - mbits;
    uint32_t e = (uint32_t)(b & 0x7Fu) >> mbits;
    uint32_t m = b & ((1u << mbits) - 1u);
    uint32_t emax = (1u << ebits) - 1u;
    if (ieee && e == emax) return gln_f32_from_bits(sign | 0x7F800000u | (m ? 0x00400000u : 0u));
    if (!ieee && e == emax && m == (1u << mbits) - 1u) return gln_f32_from_bits(sign | 0x7FC00000u);
    if (e != 0) return gln_f32_from_bits(sign | ((e + 127u - (uint32_t)bias) << 23) | (m << (23 - mbits)));
    if (m == 0) return gln_f32_from_bits(sign);
    int shift = 0; /* subnormal: normalize m · 2^(1-bias-mbits) */
    while (!(m & (1u << mbits))) {
        m <<= 1;
        shift++;
    }
    uint32_t exp = (uint32_t)(127 + 1 - bias - shift);
    return gln_f32_from_bits(sign | (exp << 23) | ((m & ((1u << mbits) - 1u)) << (23 - mbits)));
}

GLN_HD static inline float gln_e4m3_bits_to_f32(uint8_t b) { return gln_fp8_generic_to_f32(b, 3, 7, 0); }
GLN_HD static inline float gln_e5m2_bits_to_f32(uint8_t b) { return gln_fp8_generic_to_f32(b, 2, 15, 1); }

/* ---- E8M0 --------------------------------------------------------------------------------- */

/* Round-up rule (TE / cuBLAS): the smallest code with 2^(code-127) >= v, saturating at 254.
 * Written on the bits of v: e = exponent field, f = mantissa; bump e when f > 0, except at
 * e = 0xFE (saturation) and for subnormal v <= 2^-127 (code 0 already covers it). */
GLN_HD static inline uint8_t gln_e8m0_round_up_bits(float v) {
    uint32_t u = gln_f32_bits(v);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0xFF;
    if (a == 0x7F800000u) return 0xFE;
    if (a == 0) return 0x00;
    uint32_t e = a >> 23;
    uint32_t f = a & 0x007FFFFFu;
    if (f > 0 && e != 0xFEu && !(e == 0 && f <= 0x00400000u)) e++;
    return (uint8_t)e;
}

/* floor(log2 |a|) of a finite non-zero FP32 value, exactly (subnormals included). */
GLN_HD static inline int gln_f32_floor_log2(float x) {
    uint32_t a = gln_f32_bits(x) & 0x7FFFFFFFu;
    int e = (int)(a >> 23);
    if (e != 0) return e - 127;
    int msb = 22;
    while (msb > 0 && !(a & (1u << msb))) msb--;
    return msb - 149;
}

/* The code for a block of amax `amax` holding data of max finite `fp8_max` and largest
 * exponent `emax_elem` (8 for E4M3, 15 for E5M2).  Both rules: NaN → 255, Inf → 254, 0 → 0. */
GLN_HD static inline uint8_t gln_e8m0_from_amax_impl(float amax, float fp8_max, int emax_elem,
                                                     int floor_rule) {
    if (!floor_rule) return gln_e8m0_round_up_bits(amax * (1.0f / fp8_max));
    uint32_t a = gln_f32_bits(amax) & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0xFF;
    if (a == 0x7F800000u) return 0xFE;
    if (a == 0) return 0x00;
    int code = gln_f32_floor_log2(amax) - emax_elem + 127;
    if (code < 0) code = 0;
    if (code > 254) code = 254;
    return (uint8_t)code;
}

/* 2^(code-127); code 0 is the subnormal 2^-127; 255 is NaN. */
GLN_HD static inline float gln_e8m0_decode(uint8_t code) {
    if (code == 0xFF) return gln_f32_from_bits(0x7FC00000u);
    if (code == 0) return gln_f32_from_bits(0x00400000u);
    return gln_f32_from_bits((uint32_t)code << 23);
}

/* 2^(127-code) exactly; code 254 is the subnormal 2^-127 (bits 0x00400000); 255 is NaN. */
GLN_HD static inline float gln_e8m0_inverse_bits(uint8_t code) {
    if (code == 0xFF) return gln_f32_from_bits(0x7FC00000u);
    if (code == 0xFE) return gln_f32_from_bits(0x00400000u);
    return gln_f32_from_bits((uint32_t)(254u - code) << 23);
}

/* ---- per-tensor / per-block scale --------------------------------------------------------- */

/* Current / block scaling: amax below epsilon is raised to epsilon (NaN passes); 0, Inf or NaN
 * amax gives 1; fp8_max / amax (one IEEE division) that overflows gives value_for_inf; with
 * power_2_scale the mantissa bits are cleared (rounds down to a power of two). */
GLN_HD static inline float gln_scale_from_amax_impl(float amax, float fp8_max, int power_2_scale,
                                                    float epsilon, float value_for_inf) {
    if (amax < epsilon) amax = epsilon;
    float scale = 1.0f;
    if (gln_f32_isfinite(amax) && amax != 0.0f) {
        scale = fp8_max / amax;
        if (gln_f32_isinf(scale)) scale = value_for_inf;
    }
    if (power_2_scale) scale = gln_f32_from_bits(gln_f32_bits(scale) & 0xFF800000u);
    return scale;
}

#endif
