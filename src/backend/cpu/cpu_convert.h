/* Element conversions between the high-precision dtypes (fp32 / bf16 / fp16) and FP32 work
 * buffers, used by the CPU GEMMs and reductions.  Widening is exact; narrowing rounds to
 * nearest even through the shared scalar numerics (src/numerics/numerics.h), so there is one definition of each
 * rounding. */
#ifndef GLN_BACKEND_CPU_CONVERT_H
#define GLN_BACKEND_CPU_CONVERT_H

#include <stddef.h>

#include "grouplin.h"

/* dst[i] = (float)src[i] for `count` elements of a high-precision dtype (exact). */
void gln_cpu_widen(const void *src, gln_dtype_t dtype, size_t count, float *dst);
/* dst[i] = round_to_dtype(src[i]) (RNE; fp32 is a copy). */
void gln_cpu_narrow(const float *src, gln_dtype_t dtype, size_t count, void *dst);
/* Element `index` of a high-precision buffer as FP32 (exact). */
float gln_cpu_load(const void *src, gln_dtype_t dtype, size_t index);
/* dst[i] = (float)src[i] for `count` raw FP8 codes (exact: every FP8 value is an FP32 value). */
void gln_cpu_widen_fp8(const uint8_t *src, gln_dtype_t fp8_dtype, size_t count, float *dst);

#endif
