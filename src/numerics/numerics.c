/* Public wrappers of the scalar numerics (grouplin.h, "Data types and scalar numerics"). */
#include "numerics/numerics.h"

#include "grouplin.h"

size_t gln_dtype_size(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return 4;
    case GLN_DTYPE_BF16: return 2;
    case GLN_DTYPE_FP16: return 2;
    case GLN_DTYPE_FP8_E4M3: return 1;
    case GLN_DTYPE_FP8_E5M2: return 1;
    case GLN_DTYPE_E8M0: return 1;
    case GLN_DTYPE_INT32: return 4;
    case GLN_DTYPE_INT64: return 8;
    default: return 0;
    }
}

const char *gln_dtype_name(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return "fp32";
    case GLN_DTYPE_BF16: return "bf16";
    case GLN_DTYPE_FP16: return "fp16";
    case GLN_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case GLN_DTYPE_FP8_E5M2: return "fp8_e5m2";
    case GLN_DTYPE_E8M0: return "e8m0";
    case GLN_DTYPE_INT32: return "int32";
    case GLN_DTYPE_INT64: return "int64";
    default: return "invalid";
    }
}

int gln_dtype_is_fp8(gln_dtype_t dtype) { return dtype == GLN_DTYPE_FP8_E4M3 || dtype == GLN_DTYPE_FP8_E5M2; }

float gln_fp8_max(gln_dtype_t fp8_dtype) {
    if (fp8_dtype == GLN_DTYPE_FP8_E4M3) return GLN_FP8_E4M3_MAX;
    if (fp8_dtype == GLN_DTYPE_FP8_E5M2) return GLN_FP8_E5M2_MAX;
    return 0.0f;
}

uint16_t gln_fp32_to_bf16(float x) { return gln_f32_to_bf16_bits(x); }
float gln_bf16_to_fp32(uint16_t bits) { return gln_bf16_bits_to_f32(bits); }
uint16_t gln_fp32_to_fp16(float x) { return gln_f32_to_fp16_bits(x); }
float gln_fp16_to_fp32(uint16_t bits) { return gln_fp16_bits_to_f32(bits); }

/* A non-FP8 dtype is a caller bug these scalar helpers cannot report: they return the NaN code
 * / NaN so the mistake is visible in the data. */
uint8_t gln_fp32_to_fp8(float x, gln_dtype_t fp8_dtype) {
    if (fp8_dtype == GLN_DTYPE_FP8_E4M3) return gln_f32_to_e4m3_bits(x);
    if (fp8_dtype == GLN_DTYPE_FP8_E5M2) return gln_f32_to_e5m2_bits(x);
    return 0x7F;
}

float gln_fp8_to_fp32(uint8_t bits, gln_dtype_t fp8_dtype) {
    if (fp8_dtype == GLN_DTYPE_FP8_E4M3) return gln_e4m3_bits_to_f32(bits);
    if (fp8_dtype == GLN_DTYPE_FP8_E5M2) return gln_e5m2_bits_to_f32(bits);
    return gln_f32_from_bits(0x7FC00000u);
}

/* emax_elem of the OCP MX spec: exponent of the largest power of two below the format max. */
static int gln_fp8_emax_elem(gln_dtype_t fp8_dtype) { return fp8_dtype == GLN_DTYPE_FP8_E5M2 ? 15 : 8; }

uint8_t gln_e8m0_from_amax(float amax, gln_dtype_t fp8_dtype, gln_e8m0_rounding_t rounding) {
    if (!gln_dtype_is_fp8(fp8_dtype)) return 0xFF;
    return gln_e8m0_from_amax_impl(amax, gln_fp8_max(fp8_dtype), gln_fp8_emax_elem(fp8_dtype),
                                   rounding == GLN_E8M0_ROUND_FLOOR);
}

float gln_e8m0_to_fp32(uint8_t code) { return gln_e8m0_decode(code); }
float gln_e8m0_inverse(uint8_t code) { return gln_e8m0_inverse_bits(code); }
