/* The device dequantization to bf16 of the emulated MXFP8 / block-scaled grouped GEMMs
 * (cuda_grouped_dequant.cu: gln_cuda_grouped_dequantize_bf16 and gln_cuda_dequantize_list_bf16)
 * against the CPU backend's gln_dequantize of every member, every element bit for bit, for both
 * kernel versions (V2, the default, and V1 under GLN_CUDA_DEQUANT_V1=1).
 *
 * The data are random bytes (every FP8 code: zeros, subnormals, NaN, E5M2 Inf) and the scales
 * random too: E8M0 codes over the whole range with extra weight on the extremes (0 = 2^-127,
 * 254, 255 = NaN), FP32 block scales that are powers of two or not, tiny or large, with an
 * occasional NaN.  Cases: MXFP8 rowwise / columnwise and BLOCK_1D / BLOCK_2D rowwise and
 * columnwise (the transposed copies), E4M3 and E5M2; members of 0, 1, 5, 17, 129 and 300 rows
 * and 40 members of random sizes; columns a multiple of 16 (16-code units), of 8 only (8-code
 * units) and neither (one element at a time); data and scale pointers off their alignment; host
 * and device splits; packed rows past the splits' sum, which must stay untouched; lists of 3 and
 * 70 tensors (two launches) including one large enough that each block loops over many items.
 * Outputs are NaN-poisoned before every call.
 *
 * One rule is the backend's own, not the host compiler's: where both the FP8 code and its scale
 * are NaN, the scale's NaN (quieted) comes out (gln_dequant_kernel's operand order); the expected
 * value there is that, whatever NaN the CPU multiplication picked.
 *
 * Skips (exit 77) without a CUDA device. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "numerics/numerics.h"
#include "tensor/scale_layout.h"

static gln_context_t *g_cu, *g_cpu;

#define POISON 0x7FA1u /* a bf16 NaN no dequantization produces (they come out quiet: 0x..C.) */

static const char *mode_name(gln_scaling_mode_t m) {
    return m == GLN_SCALING_MXFP8_1D ? "mxfp8" : m == GLN_SCALING_BLOCK_1D ? "block1d" : "block2d";
}

static void fill_codes(gln_rng_t *r, uint8_t *q, size_t n) {
    for (size_t i = 0; i < n; i++) q[i] = (uint8_t)gln_rng_int(r, 0, 255);
}

/* n decode scales of `mode`: E8M0 codes or FP32 values. */
static void fill_scales(gln_rng_t *r, gln_scaling_mode_t mode, void *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const int64_t pick = gln_rng_int(r, 0, 99);
        if (mode == GLN_SCALING_MXFP8_1D) {
            uint8_t c = (uint8_t)gln_rng_int(r, 100, 150);
            if (pick < 4) c = (uint8_t)gln_rng_int(r, 0, 3); /* products deep in the subnormals */
            else if (pick < 6) c = 254;
            else if (pick < 8) c = 255; /* NaN */
            else if (pick < 12) c = (uint8_t)gln_rng_int(r, 0, 255);
            ((uint8_t *)s)[i] = c;
        } else {
            float v = ldexpf(1.0f, (int)gln_rng_int(r, -20, 10));
            if (pick < 30) v *= 1.0f + (float)gln_rng_int(r, 1, 127) / 128.0f; /* not a power of two */
            if (pick >= 30 && pick < 34) v = ldexpf(1.0f, (int)gln_rng_int(r, -140, -120)); /* subnormal products */
            if (pick >= 34 && pick < 36) v = ldexpf(1.5f, 120); /* products past bf16's range: Inf */
            if (pick == 36) v = gln_f32_from_bits(0x7FC00000u); /* NaN */
            if (pick == 37) v = -v;
            ((float *)s)[i] = v;
        }
    }
}

static int code_is_nan(uint8_t b, gln_dtype_t dt) {
    return dt == GLN_DTYPE_FP8_E4M3 ? (b & 0x7F) == 0x7F : (b & 0x7C) == 0x7C && (b & 3) != 0;
}

/* The decode scale of element (r, c) of an [m, cols] tensor's copy, as FP32 bits. */
static uint32_t scale_bits(gln_scaling_mode_t mode, int columnwise, const void *s, int64_t m, int64_t cols,
                           int64_t r, int64_t c) {
    const int64_t k = gln_scale_index(mode, m, cols, columnwise, r, c);
    if (mode == GLN_SCALING_MXFP8_1D) return gln_f32_bits(gln_e8m0_decode(((const uint8_t *)s)[k]));
    return gln_f32_bits(((const float *)s)[k]);
}

/* Expected bf16 of one [m, cols] tensor (host buffers q / s of copy `columnwise`) into ref:
 * gln_dequantize on the CPU backend, then the both-NaN rule. */
static void reference(gln_scaling_mode_t mode, gln_dtype_t dt, int columnwise, const uint8_t *q, const void *s,
                      int64_t m, int64_t cols, uint16_t *ref) {
    if (m == 0) return;
    gln_tensor_t in = gln_tensor_make(dt, m, cols, NULL);
    in.scaling = mode;
    if (columnwise) in.col_data = (void *)q, in.col_scale_inv = (void *)s;
    else in.data = (void *)q, in.scale_inv = (void *)s;
    gln_tensor_t out = gln_tensor_make(GLN_DTYPE_BF16, m, cols, ref);
    CHECK_OK(gln_dequantize(g_cpu, &in, columnwise, &out));
    const int transposed = columnwise && gln_scaling_transposes(mode);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < cols; c++) {
            const uint8_t b = transposed ? q[c * m + r] : q[r * cols + c];
            const uint32_t sb = scale_bits(mode, columnwise, s, m, cols, r, c);
            if (code_is_nan(b, dt) && (sb & 0x7FFFFFFFu) > 0x7F800000u)
                ref[r * cols + c] = gln_f32_to_bf16_bits(gln_f32_from_bits(sb | 0x00400000u));
        }
}

/* Backend memory of `bytes`, holding a copy of h when h is not NULL. */
static void *dev_upload(const void *h, size_t bytes) {
    void *d = NULL;
    CHECK_OK(gln_malloc(g_cu, bytes ? bytes : 1, &d));
    if (d && h && bytes) CHECK_OK(gln_memcpy(g_cu, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    return d;
}

static uint16_t *poisoned(size_t n) {
    uint16_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = POISON;
    return p;
}

/* got == want over n bf16, the first difference reported with its row and column. */
static void compare(const char *what, const uint16_t *got, const uint16_t *want, size_t n, int64_t cols) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            CHECK_MSG(0, "%s: element [%lld, %lld] = 0x%04x, want 0x%04x", what, (long long)(i / (size_t)cols),
                      (long long)(i % (size_t)cols), got[i], want[i]);
            return;
        }
}

static void set_v1(int on) {
    if (on) setenv("GLN_CUDA_DEQUANT_V1", "1", 1);
    else unsetenv("GLN_CUDA_DEQUANT_V1");
}

/* ---- grouped ------------------------------------------------------------------------------- */

/* One grouped case: `num` members of splits over rows = their sum + `extra` packed rows.
 * misalign: the device data pointer 8 bytes and the scale pointer 4 bytes past an allocation. */
static void grouped_case(gln_rng_t *rng, gln_scaling_mode_t mode, gln_dtype_t dt, int columnwise, int num,
                         const int64_t *splits, int64_t cols, int64_t extra, int device_splits, int misalign) {
    int64_t rows = extra;
    for (int i = 0; i < num; i++) rows += splits[i];
    int64_t *ro = malloc((size_t)(num + 1) * sizeof *ro), *co = malloc((size_t)(num + 1) * sizeof *co);
    CHECK_OK(gln_grouped_scale_offsets(mode, num, splits, cols, ro, co));
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4, n = (size_t)rows * (size_t)cols;
    const size_t ns = (size_t)(columnwise ? co[num] : ro[num]);
    uint8_t *q = malloc(n ? n : 1);
    void *s = malloc(ns * es + 1);
    fill_codes(rng, q, n);
    fill_scales(rng, mode, s, ns);
    /* the expected output: each member's CPU dequantization at its packed rows */
    uint16_t *want = poisoned(n);
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        const size_t at = (size_t)r0 * (size_t)cols;
        reference(mode, dt, columnwise, q + at, (const uint8_t *)s + (size_t)(columnwise ? co[i] : ro[i]) * es,
                  splits[i], cols, want + at);
        r0 += splits[i];
    }
    const size_t qoff = misalign ? 8 : 0, soff = misalign ? 4 : 0;
    uint8_t *qd = dev_upload(NULL, n + qoff), *sd = dev_upload(NULL, ns * es + soff);
    if (qd && n) CHECK_OK(gln_memcpy(g_cu, qd + qoff, q, n, GLN_COPY_HOST_TO_BACKEND));
    if (sd && ns) CHECK_OK(gln_memcpy(g_cu, sd + soff, s, ns * es, GLN_COPY_HOST_TO_BACKEND));
    int64_t *splits_d = device_splits ? dev_upload(splits, (size_t)num * sizeof *splits) : NULL;
    gln_grouped_tensor_t g = {num, device_splits ? splits_d : splits, device_splits,
                              gln_tensor_make(dt, rows, cols, NULL)};
    g.packed.scaling = mode;
    if (columnwise) g.packed.col_data = qd + qoff, g.packed.col_scale_inv = sd + soff;
    else g.packed.data = qd + qoff, g.packed.scale_inv = sd + soff;
    uint16_t *got = malloc((n ? n : 1) * sizeof *got), *pois = poisoned(n);
    void *out = dev_upload(pois, n * sizeof *got);
    gln_cuda_plan_t plan;
    CHECK_OK(gln_cuda_plan_make(g_cu, &g, mode, &plan, "test_cuda_grouped_dequant"));
    for (int v1 = 0; v1 < 2; v1++) {
        char what[200];
        snprintf(what, sizeof what, "grouped %s %s %s v%d num %d cols %lld rows %lld%s%s", mode_name(mode),
                 dt == GLN_DTYPE_FP8_E4M3 ? "e4m3" : "e5m2", columnwise ? "columnwise" : "rowwise", v1 ? 1 : 2, num,
                 (long long)cols, (long long)rows, device_splits ? " device splits" : "",
                 misalign ? " misaligned" : "");
        if (n) CHECK_OK(gln_memcpy(g_cu, out, pois, n * sizeof *got, GLN_COPY_HOST_TO_BACKEND));
        set_v1(v1);
        CHECK_OK(gln_cuda_grouped_dequantize_bf16(g_cu, &g, columnwise, &plan, out, "test_cuda_grouped_dequant"));
        set_v1(0);
        CHECK_OK(gln_synchronize(g_cu));
        if (n) CHECK_OK(gln_memcpy(g_cu, got, out, n * sizeof *got, GLN_COPY_BACKEND_TO_HOST));
        compare(what, got, want, n, cols);
    }
    gln_cuda_plan_free(g_cu, &plan);
    CHECK_OK(gln_context_async_error(g_cu));
    CHECK_OK(gln_free(g_cu, out));
    CHECK_OK(gln_free(g_cu, qd));
    CHECK_OK(gln_free(g_cu, sd));
    if (splits_d) CHECK_OK(gln_free(g_cu, splits_d));
    free(ro), free(co), free(q), free(s), free(want), free(got), free(pois);
}

static const gln_scaling_mode_t k_modes[3] = {GLN_SCALING_MXFP8_1D, GLN_SCALING_BLOCK_1D, GLN_SCALING_BLOCK_2D};

static void test_grouped(void) {
    static const int64_t awkward[] = {0, 1, 5, 17, 129, 300};
    static const int64_t cols_set[] = {544, 72, 37}; /* units of 16, of 8, one element at a time */
    gln_rng_t rng = gln_rng_seed(31);
    for (int mi = 0; mi < 3; mi++)
        for (int dti = 0; dti < 2; dti++)
            for (int cw = 0; cw < 2; cw++)
                for (int ci = 0; ci < 3; ci++) {
                    const gln_dtype_t dt = dti ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
                    grouped_case(&rng, k_modes[mi], dt, cw, 6, awkward, cols_set[ci], 3, ci == 0, 0);
                }
}

/* Many members (the member search steps over 32 members at a time), misaligned pointers, and a
 * single member of every row. */
static void test_grouped_more(void) {
    gln_rng_t rng = gln_rng_seed(32);
    int64_t many[40];
    for (int i = 0; i < 40; i++) many[i] = gln_rng_int(&rng, 0, 3) ? gln_rng_int(&rng, 0, 70) : 0;
    static const int64_t one[] = {257};
    for (int mi = 0; mi < 3; mi++)
        for (int cw = 0; cw < 2; cw++) {
            grouped_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E4M3, cw, 40, many, 160, 0, 1, 0);
            grouped_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E5M2, cw, 40, many, 544, 5, 0, 1);
            grouped_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E4M3, cw, 1, one, 1040, 0, 1, 0);
        }
}

/* ---- list ---------------------------------------------------------------------------------- */

static void list_case(gln_rng_t *rng, gln_scaling_mode_t mode, gln_dtype_t dt, int columnwise, int num, int64_t R,
                      int64_t C) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(mode, dt, R, C, &lay));
    const size_t n = (size_t)R * (size_t)C, sb = columnwise ? lay.col_scale_bytes : lay.scale_bytes;
    const size_t es = mode == GLN_SCALING_MXFP8_1D ? 1 : 4;
    uint8_t *q = malloc(n * (size_t)num);
    uint8_t *s = malloc(sb * (size_t)num);
    fill_codes(rng, q, n * (size_t)num);
    fill_scales(rng, mode, s, sb * (size_t)num / es);
    uint16_t *want = poisoned(n * (size_t)num);
    gln_tensor_t *list = calloc((size_t)num, sizeof *list);
    void **qd = calloc((size_t)num, sizeof *qd), **sd = calloc((size_t)num, sizeof *sd);
    for (int i = 0; i < num; i++) {
        reference(mode, dt, columnwise, q + (size_t)i * n, s + (size_t)i * sb, R, C, want + (size_t)i * n);
        qd[i] = dev_upload(q + (size_t)i * n, n);
        sd[i] = dev_upload(s + (size_t)i * sb, sb);
        list[i] = gln_tensor_make(dt, R, C, NULL);
        list[i].scaling = mode;
        if (columnwise) list[i].col_data = qd[i], list[i].col_scale_inv = sd[i];
        else list[i].data = qd[i], list[i].scale_inv = sd[i];
    }
    const size_t total = n * (size_t)num;
    uint16_t *got = malloc(total * sizeof *got), *pois = poisoned(total);
    void *out = dev_upload(pois, total * sizeof *got);
    for (int v1 = 0; v1 < 2; v1++) {
        char what[160];
        snprintf(what, sizeof what, "list %s %s %s v%d num %d [%lld, %lld]", mode_name(mode),
                 dt == GLN_DTYPE_FP8_E4M3 ? "e4m3" : "e5m2", columnwise ? "columnwise" : "rowwise", v1 ? 1 : 2, num,
                 (long long)R, (long long)C);
        CHECK_OK(gln_memcpy(g_cu, out, pois, total * sizeof *got, GLN_COPY_HOST_TO_BACKEND));
        set_v1(v1);
        CHECK_OK(gln_cuda_dequantize_list_bf16(g_cu, list, num, columnwise, out, "test_cuda_grouped_dequant"));
        set_v1(0);
        CHECK_OK(gln_synchronize(g_cu));
        CHECK_OK(gln_memcpy(g_cu, got, out, total * sizeof *got, GLN_COPY_BACKEND_TO_HOST));
        compare(what, got, want, total, C);
    }
    for (int i = 0; i < num; i++) {
        CHECK_OK(gln_free(g_cu, qd[i]));
        CHECK_OK(gln_free(g_cu, sd[i]));
    }
    CHECK_OK(gln_free(g_cu, out));
    free(q), free(s), free(want), free(list), free(qd), free(sd), free(got), free(pois);
}

static void test_list(void) {
    gln_rng_t rng = gln_rng_seed(33);
    for (int mi = 0; mi < 3; mi++)
        for (int cw = 0; cw < 2; cw++) {
            list_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E4M3, cw, 3, 130, 544);
            list_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E5M2, cw, 3, 40, 37);
            list_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E4M3, cw, 70, 96, 72); /* two launches */
        }
}

/* Thousands of items per launch: every block loops over many. */
static void test_list_large(void) {
    gln_rng_t rng = gln_rng_seed(34);
    for (int mi = 0; mi < 3; mi++)
        for (int cw = 0; cw < 2; cw++) list_case(&rng, k_modes[mi], GLN_DTYPE_FP8_E4M3, cw, 64, 256, 1024);
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu,
    GLN_CASE(test_grouped), GLN_CASE(test_grouped_more), GLN_CASE(test_list), GLN_CASE(test_list_large))
