/* Widening (bf16 / fp16 -> FP32) and narrowing (FP32 -> bf16 / fp16) of whole buffers for the
 * CPU GEMMs and reductions, split over the backend's threads (see cpu_convert.h).
 *
 * These loops run over whole operands around every GEMM; the default -O2 of GCC 12 does not
 * vectorize loops of unknown length, so ask for it here (measured: bf16 widen 0.36 -> 0.13 ns,
 * narrow 0.83 -> 0.52 ns per element).  Placed before the includes so the inlined scalar
 * conversions are compiled with the same options. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include "backend/cpu/cpu_convert.h"

#include <string.h>

#include "backend/cpu/cpu_fp8.h"
#include "backend/cpu/cpu_simd.h"
#include "backend/cpu/cpu_threads.h"

#include "numerics/numerics.h"

float gln_cpu_load(const void *src, gln_dtype_t dtype, size_t index) {
    switch (dtype) {
    case GLN_DTYPE_FP32: return ((const float *)src)[index];
    case GLN_DTYPE_BF16: return gln_bf16_bits_to_f32(((const uint16_t *)src)[index]);
    case GLN_DTYPE_FP16: return gln_fp16_bits_to_f32(((const uint16_t *)src)[index]);
    default: return 0.0f; /* callers validated the dtype */
    }
}

/* Whole-operand passes (a GEMM operand or output, ~0.1-0.5 ns per element) are split over the
 * BLAS threads in contiguous ranges when each thread gets at least this many elements; the
 * short spans of the quantizers stay on their thread. */
#define GLN_CPU_CONVERT_MIN 1048576

typedef struct convert_job {
    const void *src;
    gln_dtype_t dtype;
    void *dst;
} convert_job_t;

static size_t hp_size(gln_dtype_t dtype) { return dtype == GLN_DTYPE_FP32 ? 4 : 2; }

static void widen_serial(const void *src, gln_dtype_t dtype, size_t count, float *dst);
static void narrow_serial(const float *src, gln_dtype_t dtype, size_t count, void *dst);

static void widen_range(void *arg, int thread, int64_t i0, int64_t i1) {
    const convert_job_t *j = arg;
    (void)thread;
    widen_serial((const char *)j->src + (size_t)i0 * hp_size(j->dtype), j->dtype, (size_t)(i1 - i0),
                 (float *)j->dst + i0);
}

static void narrow_range(void *arg, int thread, int64_t i0, int64_t i1) {
    const convert_job_t *j = arg;
    (void)thread;
    narrow_serial((const float *)j->src + i0, j->dtype, (size_t)(i1 - i0),
                  (char *)j->dst + (size_t)i0 * hp_size(j->dtype));
}

void gln_cpu_widen(const void *src, gln_dtype_t dtype, size_t count, float *dst) {
    convert_job_t j = {src, dtype, dst};
    gln_cpu_parallel_for(gln_cpu_threads(count, GLN_CPU_CONVERT_MIN), (int64_t)count, widen_range, &j);
}

void gln_cpu_narrow(const float *src, gln_dtype_t dtype, size_t count, void *dst) {
    if (dtype == GLN_DTYPE_FP32 && (const void *)src == dst) return;
    if (dtype == GLN_DTYPE_FP32) { /* possibly overlapping: one memmove */
        memmove(dst, src, count * sizeof(float));
        return;
    }
    convert_job_t j = {src, dtype, dst};
    gln_cpu_parallel_for(gln_cpu_threads(count, GLN_CPU_CONVERT_MIN), (int64_t)count, narrow_range, &j);
}

GLN_CPU_HOT
static void widen_serial(const void *src, gln_dtype_t dtype, size_t count, float *dst) {
    if (dtype == GLN_DTYPE_FP32) {
        memcpy(dst, src, count * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    if (dtype == GLN_DTYPE_BF16) {
        for (size_t i = 0; i < count; i++) dst[i] = gln_bf16_bits_to_f32(s[i]);
    } else {
        for (size_t i = 0; i < count; i++) dst[i] = gln_fp16_bits_to_f32(s[i]);
    }
}

GLN_CPU_HOT
static void narrow_serial(const float *src, gln_dtype_t dtype, size_t count, void *dst) {
    uint16_t *d = dst;
    if (dtype == GLN_DTYPE_BF16) {
        for (size_t i = 0; i < count; i++) d[i] = gln_f32_to_bf16_bits(src[i]);
    } else {
        for (size_t i = 0; i < count; i++) d[i] = gln_f32_to_fp16_bits(src[i]);
    }
}

typedef struct fp8_job {
    const uint8_t *src;
    gln_dtype_t fp8;
    float *dst;
} fp8_job_t;

GLN_CPU_HOT
static void widen_fp8_range(void *arg, int thread, int64_t i0, int64_t i1) {
    const fp8_job_t *j = arg;
    (void)thread;
    const uint8_t *src = j->src;
    float *dst = j->dst;
    /* Branch-free decoders (cpu_fp8.h, identical to the reference's for all 256 codes): they
     * vectorize, where a 256-entry table lookup does one element at a time. */
    if (j->fp8 == GLN_DTYPE_FP8_E5M2) {
        for (int64_t i = i0; i < i1; i++) dst[i] = gln_cpu_e5m2_decode(src[i]);
    } else {
        for (int64_t i = i0; i < i1; i++) dst[i] = gln_cpu_e4m3_decode(src[i]);
    }
}

void gln_cpu_widen_fp8(const uint8_t *src, gln_dtype_t fp8_dtype, size_t count, float *dst) {
    fp8_job_t j = {src, fp8_dtype, dst};
    gln_cpu_parallel_for(gln_cpu_threads(count, GLN_CPU_CONVERT_MIN), (int64_t)count, widen_fp8_range, &j);
}
