/* The device dequantization to bf16 of the emulated MXFP8 / block-scaled grouped GEMMs
 * (cuda_grouped_dequant.cu: gln_cuda_grouped_dequantize_bf16 and gln_cuda_dequantize_list_bf16)
 * against the CPU backend's gln_dequantize of every member, every element bit for bit, and which
 * kernel the dispatch picked (gln_cuda_dequant_last_kernel): units of 16 codes, of 8, one element
 * at a time, or the transposed copies' kernel, each forced by the case's columns, alignment and
 * copy.
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
 * Outputs are NaN-poisoned device twins (tests/harness/device_twin.h) followed by guard bytes
 * that must survive.
 *
 * One rule is the backend's own, not the host compiler's: where both the FP8 code and its scale
 * are NaN, the scale's NaN (quieted) comes out (gln_dequant_kernel's operand order); the expected
 * value there is that, whatever NaN the CPU multiplication picked.
 *
 * Skips (exit 77) without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_twin.h"
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block.h"
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

static uint16_t *poisoned(size_t n) {
    uint16_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = POISON;
    return p;
}

/* An output twin of n bf16, both copies POISON, the guard after the device copy. */
static gln_twin_t out_twin(size_t n) {
    gln_twin_t o = gln_twin_new(g_cu, n * sizeof(uint16_t), 0, 0);
    uint16_t *pois = poisoned(n);
    gln_twin_set(g_cu, &o, pois);
    free(pois);
    return o;
}

static void describe_elem(const void *arg, size_t i, char *out, size_t n) {
    const int64_t cols = *(const int64_t *)arg;
    const size_t e = i / 2;
    snprintf(out, n, "bf16 element [%lld, %lld] byte %zu", (long long)(e / (size_t)cols),
             (long long)(e % (size_t)cols), i % 2);
}

/* The kernel the dispatch must pick: the transposed copies' one, else units of 16 / 8 codes when
 * the columns and the data pointers (OR-ed) allow, else one element at a time (the output is
 * 16-byte aligned in every case here). */
static const char *want_kernel(gln_scaling_mode_t mode, int columnwise, int64_t cols, uintptr_t data_or) {
    if (columnwise && mode != GLN_SCALING_MXFP8_1D) return "gln_dequant_transposed_kernel";
    if (cols % 16 == 0 && (data_or & 15u) == 0) return "gln_dequant_rows_kernel<16>";
    if (cols % 8 == 0 && (data_or & 7u) == 0) return "gln_dequant_rows_kernel<8>";
    return "gln_dequant_rows_kernel<1>";
}

static void check_kernel(const char *want, const char *what) {
    const char *got = gln_cuda_dequant_last_kernel();
    CHECK_MSG(got && strcmp(got, want) == 0, "%s: ran %s, want %s", what, got ? got : "no kernel", want);
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
    const size_t qoff = misalign ? 8 : 0, soff = misalign ? 4 : 0;
    gln_twin_t qd = gln_twin_input(g_cu, q, n, qoff), sd = gln_twin_input(g_cu, s, ns * es, soff);
    gln_twin_t spd = gln_twin_input(g_cu, splits, (size_t)num * sizeof *splits, 0);
    gln_twin_t out = out_twin(n);
    /* the expected output (out.h): each member's CPU dequantization at its packed rows */
    int64_t r0 = 0;
    for (int i = 0; i < num; i++) {
        const size_t at = (size_t)r0 * (size_t)cols;
        reference(mode, dt, columnwise, q + at, (const uint8_t *)s + (size_t)(columnwise ? co[i] : ro[i]) * es,
                  splits[i], cols, (uint16_t *)out.h + at);
        r0 += splits[i];
    }
    gln_grouped_tensor_t g = {num, device_splits ? (const int64_t *)spd.d : splits, device_splits,
                              gln_tensor_make(dt, rows, cols, NULL)};
    g.packed.scaling = mode;
    if (columnwise) g.packed.col_data = qd.d, g.packed.col_scale_inv = sd.d;
    else g.packed.data = qd.d, g.packed.scale_inv = sd.d;
    gln_cuda_plan_t plan;
    CHECK_OK(gln_cuda_plan_make(g_cu, &g, mode, &plan, "test_cuda_grouped_dequant"));
    char what[200];
    snprintf(what, sizeof what, "grouped %s %s %s num %d cols %lld rows %lld%s%s", mode_name(mode),
             dt == GLN_DTYPE_FP8_E4M3 ? "e4m3" : "e5m2", columnwise ? "columnwise" : "rowwise", num, (long long)cols,
             (long long)rows, device_splits ? " device splits" : "", misalign ? " misaligned" : "");
    (void)gln_cuda_dequant_last_kernel();
    CHECK_OK(gln_cuda_grouped_dequantize_bf16(g_cu, &g, columnwise, &plan, out.d, "test_cuda_grouped_dequant"));
    if (n) check_kernel(want_kernel(mode, columnwise, cols, (uintptr_t)qd.d), what);
    CHECK_OK(gln_synchronize(g_cu));
    gln_twin_check(g_cu, &out, 1, what, "out", describe_elem, &cols);
    gln_cuda_plan_free(g_cu, &plan);
    CHECK_OK(gln_context_async_error(g_cu));
    gln_twin_free(g_cu, &out);
    gln_twin_free(g_cu, &qd);
    gln_twin_free(g_cu, &sd);
    gln_twin_free(g_cu, &spd);
    free(ro), free(co), free(q), free(s);
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
    const size_t total = n * (size_t)num;
    gln_twin_t out = out_twin(total);
    gln_tensor_t *list = calloc((size_t)num, sizeof *list);
    gln_twin_t *qd = calloc((size_t)num, sizeof *qd), *sd = calloc((size_t)num, sizeof *sd);
    uintptr_t data_or = 0;
    for (int i = 0; i < num; i++) {
        reference(mode, dt, columnwise, q + (size_t)i * n, s + (size_t)i * sb, R, C, (uint16_t *)out.h + (size_t)i * n);
        qd[i] = gln_twin_input(g_cu, q + (size_t)i * n, n, 0);
        sd[i] = gln_twin_input(g_cu, s + (size_t)i * sb, sb, 0);
        data_or |= (uintptr_t)qd[i].d;
        list[i] = gln_tensor_make(dt, R, C, NULL);
        list[i].scaling = mode;
        if (columnwise) list[i].col_data = qd[i].d, list[i].col_scale_inv = sd[i].d;
        else list[i].data = qd[i].d, list[i].scale_inv = sd[i].d;
    }
    char what[160];
    snprintf(what, sizeof what, "list %s %s %s num %d [%lld, %lld]", mode_name(mode),
             dt == GLN_DTYPE_FP8_E4M3 ? "e4m3" : "e5m2", columnwise ? "columnwise" : "rowwise", num, (long long)R,
             (long long)C);
    (void)gln_cuda_dequant_last_kernel();
    CHECK_OK(gln_cuda_dequantize_list_bf16(g_cu, list, num, columnwise, out.d, "test_cuda_grouped_dequant"));
    check_kernel(want_kernel(mode, columnwise, C, data_or), what);
    CHECK_OK(gln_synchronize(g_cu));
    int64_t cols = C;
    gln_twin_check(g_cu, &out, 1, what, "out", describe_elem, &cols);
    for (int i = 0; i < num; i++) {
        gln_twin_free(g_cu, &qd[i]);
        gln_twin_free(g_cu, &sd[i]);
    }
    gln_twin_free(g_cu, &out);
    free(q), free(s), free(list), free(qd), free(sd);
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
