/* Comparing the CUDA backend with the CPU backend, the reference: the inputs both get (awkward
 * shapes and values), and the GEMM tolerance between their results.  Shared by
 * test_cuda_backend.c (amax, cast, quantize), test_cuda_backend_gemm.c (GEMMs) and
 * test_cuda_backend_grouped.c (grouped GEMM, dbias).  Failures are recorded with CHECK_MSG. */
#ifndef GLN_TEST_CUDA_COMPARE_H
#define GLN_TEST_CUDA_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"
#include "harness.h"

#define GLN_CMP_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* GEMM tolerances.  GEMMs: both backends multiply the same exact operand values and accumulate in FP32, only in a
 * different order (cuBLASLt tiles / split-K vs OpenBLAS), so the FP32 results differ by at most
 * twice the standard summation bound γ_k·Σ|a·b| (one per backend), u = 2^-24.  The output is
 * then rounded once in each backend; when the FP32 values straddle a rounding boundary the two
 * roundings land one output ulp apart — allow GEMM_OUT_ULPS ulps of the output dtype (2: one for
 * the boundary, one of margin for the FP8 scale product, which cuBLASLt applies as
 * scale_a·scale_b·acc and the CPU as (scale_a·scale_b)·acc).  fp32 products themselves are not
 * exact (FMA vs separate rounding): covered by the (k + 2) term. */
#define GLN_CMP_GEMM_OUT_ULPS 2.0
/* Per-tensor FP8 GEMMs on Hopper: the FP8 tensor-core MMA accumulates with a reduced-precision
 * (about 14-bit mantissa) accumulator that cuBLASLt promotes to FP32 only between K chunks
 * (DeepSeek-V3 report, §3.3.2, measured on H800), so the GPU result is not within the FP32
 * summation bound of the CPU's.  Differences seen on the H200 reach 2^-14.7·Σ|a·b|; 2^-10·Σ|a·b|
 * leaves ~25x headroom and still catches a wrong scale or operand (errors >= 2^-8 relative). */
#define GLN_CMP_GEMM_FP8_ACC_REL (1.0 / 1024.0)
#define GLN_CMP_GEMM_SUM_TERMS_EXTRA 2.0
#define GLN_CMP_U32 (1.0 / 16777216.0)

/* Awkward shapes: rows 1, 5, 17, 129; columns 48, 4096; the high-precision dtypes. */
#define GLN_CMP_NROWS 4
#define GLN_CMP_NCOLS 2
#define GLN_CMP_NHP 3
extern const int64_t gln_cmp_rows[GLN_CMP_NROWS];
extern const int64_t gln_cmp_cols[GLN_CMP_NCOLS];
extern const gln_dtype_t gln_cmp_hp[GLN_CMP_NHP];

float gln_cmp_f32_from_bits(uint32_t u);
uint32_t gln_cmp_f32_bits(float f);
/* Host tensor [rows, cols] of dtype with N(0, sigma²) values (calloc'd; free()); with `specials`,
 * row 0 gets a zero block (first 32 columns), and scattered NaN, ±Inf, huge (overflow fp8 /
 * fp16) and tiny values (specials == 2: also a negative NaN). */
void *gln_cmp_make_hp(gln_rng_t *rng, gln_dtype_t dtype, int64_t rows, int64_t cols, double sigma, int specials);

/* Logical FP32 values of an operand (high precision, or the dequantized rowwise copy; free()). */
float *gln_cmp_operand_values(const gln_tensor_t *t);
/* Spacing of dtype values near |x| (one ulp). */
double gln_cmp_ulp(double x, gln_dtype_t dtype);
/* CUDA D (downloaded, `got`) against CPU D (`ref`): |cuda - cpu| <= GLN_CMP_GEMM_OUT_ULPS·ulp(cpu)
 * + (2·(k + 2)·u + acc_rel)·S, S = Σ|a·b| + |bias| + |old D|, computed in double from the
 * operands' values a [.., a_cols] and b [.., b_cols] (bias, d_old: NULL when absent). */
void gln_cmp_gemm(const char *what, gln_gemm_layout_t layout, const float *a, const float *b, int64_t m, int64_t n,
                  int64_t k, int64_t a_cols, int64_t b_cols, const float *bias, const float *d_old, const void *got,
                  const void *ref, gln_dtype_t dtype, double acc_rel);
/* "TN", "NN" or "NT". */
const char *gln_cmp_layout_name(gln_gemm_layout_t l);

#endif
