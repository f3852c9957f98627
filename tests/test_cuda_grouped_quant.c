/* The CUDA per-tensor quantizer (TENSOR: current and delayed scaling; cuda_quant_tensor.cu) and the
 * grouped dispatch shared with MXFP8 (cuda_quant_members.cu) against the CPU reference, bit for
 * bit: every data byte, every scale (MXFP8 grid padding included), amax and scale, and every byte
 * the quantizer must leave alone.
 *
 *   - the FP8 encode over every sign / exponent / top-7-mantissa-bit pattern of FP32 with the
 *     rounding-critical low bits (ties, just above / below), and every bf16 / fp16 input, through
 *     delayed scaling with scale 1 (x·1 = x: the encode alone);
 *   - one tensor through gln_quantize: 1x1, 3x33, 129x31, 130x257, empty shapes and
 *     vector-friendly ones, fp32 / bf16 / fp16, rowwise / columnwise / both, current (with and
 *     without the caller's amax / scale buffers, power-of-two scales, epsilon) and delayed
 *     scaling, MXFP8 with both E8M0 rules, both NaN rules, E4M3 / E5M2, NaN / Inf / tiny / huge
 *     values, misaligned buffers (the scalar paths);
 *   - grouped tensors through gln_grouped_quantize with host and device splits (and a separate
 *     device copy of out's splits): members of 0 / 1 / 5 / 17 / 129 / 300 rows, one member
 *     holding every row, 16-row multiples (16-byte transposed stores), 128 members, trailing
 *     packed rows that must stay untouched;
 *   - a CUDA graph capturing grouped quantizes (TENSOR current, TENSOR delayed, MXFP8) with device
 *     splits on a caller's stream, replayed with other splits written between replays;
 *   - bad device splits (negative, past the rows, out's differing from in's): clamped on the
 *     device, reported by gln_context_async_error, results equal to the CPU on the clamped splits;
 *   - the per-tensor TMA kernel (tq_tma_kernel: bf16 / fp16, cols % 8 == 0, an aligned input) on
 *     shapes of its own: columns 8 .. 1032 that are and are not multiples of 16, 64 and 128 (both
 *     tilings: 64 columns up to cols 64, 128 above; a row's last chunk of 8 columns), members of
 *     0 / 1 / 31 / 33 / 127 / 128 / 129 / 300 rows (partial boxes loading the next member's rows,
 *     which must be masked), rows past the packed tensor (the box's zero fill), misaligned
 *     outputs (the stores' fallbacks);
 *   - the dispatch: gln_cuda_quant_last_kernel names tq_tma_kernel for the cases it takes and
 *     tq_general_kernel for FP32 input, a misaligned input, cols % 8 != 0; the general kernel on
 *     the grouped and TMA shapes through a misaligned input (which it alone takes);
 *   - every quantize grid capped at 1 and 3 blocks (GLN_CUDA_QUANT_GRID), so that a block walks
 *     many tiles and members and turns the TMA stage ring many times.
 * Outputs are poisoned (0xA5 data, 0xFF scales: NaN floats) on both backends and followed by
 * guard bytes on the device; a mismatch names the buffer, member, row, column, got and want.
 * The MXFP8 kernels' own cases are test_cuda_quant_mxfp8.c.
 *
 * Skips (exit 77) without a CUDA device. */
#define _DEFAULT_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "quant_check.h"

#ifdef GLN_TEST_HAVE_CUDA
#include "backend/cuda/cuda_backend.h" /* gln_cuda_quant_last_kernel */

/* ---- the encode over its rounding-critical inputs ------------------------------------------- */

/* Delayed scaling with scale 1 quantizes x itself: the CPU's and CUDA's codes of every input. */
static void sweep_case(gln_dtype_t dt, const void *h, int64_t rows, int64_t cols, gln_dtype_t fp8) {
    gln_quant_config_t cfg = make_cfg(M_DELAYED, 3, fp8 == GLN_DTYPE_FP8_E5M2 ? 4 : 0);
    const size_t nd = (size_t)rows * (size_t)cols;
    const float one = 1.0f, zero = 0.0f;
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), 0);
    qout_t o = qout_new(&cfg, nd, 1, 1, 1, &zero, &one, 0);
    gln_tensor_t hin = gln_tensor_make(dt, rows, cols, x.h), din = gln_tensor_make(dt, rows, cols, x.d);
    gln_tensor_t hq = qout_tensor(&cfg, &o, rows, cols, 0), dq = qout_tensor(&cfg, &o, rows, cols, 1);
    CHECK_OK(gln_quantize(g_cpu, &cfg, &hin, &hq));
    CHECK_OK(gln_quantize(g_cu, &cfg, &din, &dq));
    char what[160];
    snprintf(what, sizeof what, "encode sweep %s -> %s (delayed, scale 1)", gln_dtype_name(dt), gln_dtype_name(fp8));
    layout_t L;
    layout_set(&L, cfg.mode, 1, &rows, cols);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &x);
}

static void test_encode_sweep(void) {
    /* FP32: sign, exponent and the top 7 mantissa bits exhaustively; the low 16 bits at the
     * rounding-critical values (for every FP8 rounding position, bits 16..22 enumerate the
     * kept / round bits and these give ties, just above and just below) */
    static const uint32_t low[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
    const int64_t cols = 1024, rows = (int64_t)(65536 * COUNT(low)) / cols;
    uint32_t *f = malloc((size_t)rows * cols * 4);
    for (uint32_t hi = 0, k = 0; hi < 65536; hi++)
        for (size_t l = 0; l < COUNT(low); l++) f[k++] = hi << 16 | low[l];
    const int64_t rows48 = 65536 / 48 + 1; /* every 16-bit pattern once more in [rows48, 48] */
    uint16_t *b = malloc((size_t)rows48 * 48 * 2);
    for (uint32_t i = 0; i < (uint32_t)(rows48 * 48); i++) b[i] = (uint16_t)i;
    for (int e5 = 0; e5 < 2; e5++) {
        const gln_dtype_t fp8 = e5 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
        sweep_case(GLN_DTYPE_FP32, f, rows, cols, fp8);
        sweep_case(GLN_DTYPE_BF16, b, 64, 1024, fp8);
        sweep_case(GLN_DTYPE_FP16, b, 64, 1024, fp8);
        sweep_case(GLN_DTYPE_FP16, b, rows48, 48, fp8); /* partial 64-column tiles */
    }
    free(f);
    free(b);
}

static void test_single(void) {
    static const int64_t shapes[][2] = {{1, 1},     {3, 33},    {129, 31}, {130, 257}, {0, 48},
                                        {17, 0},    {128, 128}, {256, 384}, {77, 136}, {64, 2048},
                                        {1, 8},     {3, 40},    {129, 24}, {130, 264}};
    gln_rng_t rng = gln_rng_seed(71);
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int m = 0; m < M_COUNT; m++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg = make_cfg(m, copies, v);
                    const gln_dtype_t dt = k_hp[(s + (size_t)copies + (size_t)v) % COUNT(k_hp)];
                    single_case(&cfg, dt, shapes[s][0], shapes[s][1], v >= 2, v & 1, 0, 0, &rng);
                }
    /* every input dtype on one shape, and misaligned buffers (scalar loads / stores) */
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (int m = 0; m < M_COUNT; m++) {
            const gln_quant_config_t cfg = make_cfg(m, 3, 2);
            single_case(&cfg, k_hp[d], 200, 512, 1, 1, 0, 0, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, 0, gln_dtype_size(k_hp[d]), 0, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, 1, 0, 1, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, 0, 0, 4, &rng);
        }
}

static const int64_t k_sp_awkward[] = {0, 1, 5, 17, 129, 300};
static const int64_t k_sp_one[] = {0, 452, 0};
static const int64_t k_sp_16[] = {16, 32, 0, 256, 128, 48};
static const int64_t k_sp_4[] = {20, 132, 4, 0, 8};
static const int64_t k_sp_single[] = {7};
static const int64_t k_sp_empty[] = {0, 0, 0};

static const splits_set_t k_sets[] = {{6, k_sp_awkward}, {3, k_sp_one}, {6, k_sp_16},
                                      {5, k_sp_4},       {1, k_sp_single}, {3, k_sp_empty}};

static void test_tma_shapes(void);

static void test_grouped(void) {
    static const int64_t cols[] = {1, 33, 48, 257, 512};
    gln_rng_t rng = gln_rng_seed(72);
    for (size_t s = 0; s < COUNT(k_sets); s++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int m = 0; m < M_COUNT; m++)
                for (int copies = 1; copies <= 3; copies++)
                    for (int v = 0; v < 8; v += 1 + (int)((s + c + (size_t)m) % 2)) {
                        const gln_quant_config_t cfg = make_cfg(m, copies, v);
                        const int64_t sum = splits_sum(k_sets[s].num, k_sets[s].splits);
                        gcase_t g = {&cfg, k_hp[(s + c + (size_t)v) % COUNT(k_hp)], k_sets[s].num, k_sets[s].splits,
                                     sum + (v & 1) * 3, cols[c]};
                        grouped_case(&g, (v + copies + m) % 3, v >= 2, (v >> 2) & 1, &rng);
                    }
    test_tma_shapes(); /* the TMA kernel's shapes */
}

/* Every input dtype with each kind of splits on the awkward splits. */
static void test_grouped_dtypes(void) {
    gln_rng_t rng = gln_rng_seed(73);
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (int m = 0; m < M_COUNT; m++)
            for (int how = 0; how < 3; how++) {
                const gln_quant_config_t cfg = make_cfg(m, 3, 2);
                gcase_t g = {&cfg, k_hp[d], 6, k_sp_awkward, 460, 384};
                grouped_case(&g, how, 1, how & 1, &rng);
            }
}

/* 128 members (some empty, many in one block's range of tiles), like the Qwen3-like experts. */
static void test_many_members(void) {
    enum { N = 128 };
    int64_t splits[N];
    gln_rng_t rng = gln_rng_seed(74);
    for (int i = 0; i < N; i++) splits[i] = i % 9 == 4 ? 0 : gln_rng_int(&rng, 1, 40) * (i % 3 == 0 ? 16 : 1);
    const int64_t sum = splits_sum(N, splits);
    for (int m = 0; m < M_COUNT; m++)
        for (int how = 0; how < 2; how++) {
            const gln_quant_config_t cfg = make_cfg(m, 3, how ? 6 : 1);
            gcase_t g = {&cfg, how ? GLN_DTYPE_BF16 : GLN_DTYPE_FP16, N, splits, sum + 5, 256};
            grouped_case(&g, how, 1, 1, &rng);
        }
}

/* The per-tensor TMA kernel's own shapes (it takes bf16 / fp16 with cols % 8 == 0): current and delayed scaling, R / C / RC, E4M3 / E5M2, both NaN rules, NaN / Inf
 * inputs, every kind of splits; members of 0 / 1 / 127 / 128 / 129 / 300 rows (a box starting in a
 * member's last partial row tile loads the next member's rows: they must not reach the amax or the
 * stores), 3 packed rows past the members on some (the box's zero fill past the tensor is never
 * reached there, but rows past the members are), columns below one box (8, 24, 40), a row's last
 * chunk of 8 columns (24, 40, 136, 264), multiples of 128 (384), and one tensor with misaligned
 * outputs (the stores' 8-byte and narrower fallbacks).  test_general runs the same on the general
 * kernel. */
static void test_tma_shapes(void) {
    static const int64_t sp_tma[] = {0, 1, 127, 128, 129, 300};
    static const int64_t sp_one[] = {300};
    static const int64_t cols[] = {8, 24, 40, 136, 264, 384};
    static const gln_dtype_t dts[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    gln_rng_t rng = gln_rng_seed(77);
    for (size_t c = 0; c < COUNT(cols); c++)
        for (int m = M_CURRENT; m <= M_DELAYED; m++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = (int)(c % 2); v < 8; v += 2) {
                    const gln_quant_config_t cfg = make_cfg(m, copies, v);
                    const gln_dtype_t dt = dts[(c + (size_t)copies + (size_t)v) % COUNT(dts)];
                    gcase_t g = {&cfg, dt, 6, sp_tma, 685 + (v & 2 ? 3 : 0), cols[c]};
                    grouped_case(&g, (v + copies + m) % 3, v >= 2, (v >> 2) & 1, &rng);
                    gcase_t one = {&cfg, dt, 1, sp_one, 300, cols[c]};
                    if (copies == 3) grouped_case(&one, v % 3, 1, 1, &rng);
                }
    for (int m = M_CURRENT; m <= M_DELAYED; m++)
        for (size_t d = 0; d < COUNT(dts); d++) {
            const gln_quant_config_t cfg = make_cfg(m, 3, 2);
            single_case(&cfg, dts[d], 130, 264, 1, 1, 0, 0, &rng);
            single_case(&cfg, dts[d], 129, 24, 1, 0, 0, 0, &rng);
            single_case(&cfg, dts[d], 130, 264, 1, 1, 0, 8, &rng); /* 8-byte aligned outputs */
            single_case(&cfg, dts[d], 130, 264, 1, 0, 0, 4, &rng);
            single_case(&cfg, dts[d], 77, 136, 1, 1, 0, 1, &rng);
            single_case(&cfg, dts[d], 200, 512, 1, 1, 0, 8, &rng);
        }
}

/* ---- bad device splits -------------------------------------------------------------------------- */

/* Device splits `bad` (clamped on the device to `clamped`): the call succeeds, the async error
 * names `needle`, and the output equals the CPU's on the clamped splits. */
static void bad_case(const gln_quant_config_t *cfg, const int64_t *bad, const int64_t *out_bad, const int64_t *clamped,
                     const char *needle) {
    enum { N = 4, ROWS = 40, COLS = 64 };
    gln_rng_t rng = gln_rng_seed(76);
    const size_t nd = (size_t)ROWS * COLS;
    void *h = make_input(&rng, GLN_DTYPE_BF16, ROWS, COLS, 0, 0);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * 2, 0);
    gln_twin_t sp = gln_twin_input(g_cu, bad, N * sizeof(int64_t), 0);
    gln_twin_t sp2 = gln_twin_input(g_cu, out_bad, N * sizeof(int64_t), 0);
    float amax0[N], scale0[N];
    const float *pa, *ps;
    tensor_state(cfg, N, 1, amax0, scale0, &pa, &ps);
    gcase_t g = {cfg, GLN_DTYPE_BF16, N, clamped, ROWS, COLS};
    size_t ns, ncs;
    scale_bounds(&g, &ns, &ncs);
    qout_t o = qout_new(cfg, nd, ns, ncs, N, pa, ps, 0);
    grouped_ref(&g, &x, &o);
    grouped_dev(&g, (const int64_t *)sp.d, out_bad != bad ? (const int64_t *)sp2.d : NULL, 1, &x, &o);
    CHECK_STATUS(gln_context_async_error(g_cu), GLN_STATUS_INVALID_ARGUMENT, needle);
    CHECK_OK(gln_context_async_error(g_cu)); /* reading clears it */
    char what[480];
    gcase_name(&g, "(bad device splits, clamped)", what, sizeof what);
    layout_t L;
    layout_set(&L, cfg->mode, N, clamped, COLS);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &sp2), gln_twin_free(g_cu, &sp), gln_twin_free(g_cu, &x);
    free(h);
}

static void test_bad_splits(void) {
    static const int64_t neg[] = {4, -1, 30, 0}, neg_c[] = {4, 0, 30, 0};
    static const int64_t past[] = {4, 1, 500, 3}, past_c[] = {4, 1, 35, 0};
    static const int64_t wrap[] = {INT64_MAX, INT64_MAX, 2, 0}, wrap_c[] = {40, 0, 0, 0};
    static const int64_t ok[] = {10, 0, 17, 13}, other[] = {10, 1, 17, 13};
    for (int m = 0; m < M_COUNT; m++) {
        const gln_quant_config_t cfg = make_cfg(m, 3, 0);
        bad_case(&cfg, neg, neg, neg_c, "member 1");
        bad_case(&cfg, past, past, past_c, "past the packed rows (at member 2");
        bad_case(&cfg, wrap, wrap, wrap_c, "past the packed rows (at member 0");
        bad_case(&cfg, ok, other, ok, "out->splits differ from in->splits (first at member 1");
    }
}

/* ---- the TMA kernel's tilings ----------------------------------------------------------------
 * Cases tq_tma_kernel takes (bf16 / fp16, cols % 8 == 0, aligned input) on both tilings (64
 * columns for cols <= 64, else 128: two boxes a tile, the second not issued where a tile holds
 * <= 64 columns of the tensor): current and delayed scaling, E4M3 / E5M2, both NaN rules, R / C /
 * RC, NaN / Inf inputs, columns 8 / 24 / 40 (less than one box), 136 / 264 (a last tile of 8
 * columns; a row's last chunk of 8), 1032 (9 tiles of 128, the last of 8 columns), rows 1 / 3 /
 * 129 / 130, members of 0 / 1 / 31 / 33 / 127 / 129 / 300 rows with trailing packed rows, host
 * and device splits; every byte against the CPU, and the kernel that ran (a misaligned input
 * runs the same cases on tq_general_kernel: test_general). */
static const int64_t k_tma_sp_awkward[] = {0, 1, 31, 33, 127, 129, 300};
static const int64_t k_tma_sp_tail[] = {129, 0, 130, 3};

/* The last call ran on the TMA kernel (on an aligned input: test_general misaligns it). */
static void expect_tma(const char *what) {
    const char *ran = gln_cuda_quant_last_kernel();
    if (!g_misalign_input)
        CHECK_MSG(ran && strcmp(ran, "tq_tma_kernel") == 0, "%s ran on %s, want tq_tma_kernel", what,
                  ran ? ran : "(none)");
}

static void tensor_tma_cases(void) {
    static const int64_t cols[] = {8, 24, 40, 136, 264, 1032};
    static const int64_t rows[] = {1, 3, 129, 130};
    static const gln_dtype_t dts[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    gln_rng_t rng = gln_rng_seed(91);
    for (size_t c = 0; c < COUNT(cols); c++)
        for (int m = M_CURRENT; m <= M_DELAYED; m++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = (int)((c + (size_t)copies) % 2); v < 8; v += 2) {
                    const gln_quant_config_t cfg = make_cfg(m, copies, v);
                    const gln_dtype_t dt = dts[(c + (size_t)copies + (size_t)(v >> 1)) % COUNT(dts)];
                    single_case(&cfg, dt, rows[(c + (size_t)v) % COUNT(rows)], cols[c], v >= 2, v & 1, 0, 0, &rng);
                    expect_tma("one tensor");
                    const int64_t sum = splits_sum(COUNT(k_tma_sp_awkward), k_tma_sp_awkward);
                    gcase_t g = {&cfg, dt, COUNT(k_tma_sp_awkward), k_tma_sp_awkward, sum + (v & 2 ? 5 : 0), cols[c]};
                    grouped_case(&g, (v + copies + m) % 3, v >= 2, (v >> 2) & 1, &rng);
                    expect_tma("grouped");
                    if (copies == 3) {
                        gcase_t t = {&cfg, dt, COUNT(k_tma_sp_tail), k_tma_sp_tail, 262 + (v & 1), cols[c]};
                        grouped_case(&t, (v + 1) % 3, 1, v & 1, &rng);
                    }
                }
    /* every row count on every column count, both scalings, both copies */
    for (size_t r = 0; r < COUNT(rows); r++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int m = M_CURRENT; m <= M_DELAYED; m++) {
                const gln_quant_config_t cfg = make_cfg(m, 3, (int)(r + c) % 8);
                single_case(&cfg, dts[(r + c) % COUNT(dts)], rows[r], cols[c], 1, (int)(r & 1), 0, 0, &rng);
            }
}

/* ---- the dispatch ------------------------------------------------------------------------------ */

/* gln_quantize of one tensor on both backends (every byte compared) ran on `kernel`. */
static void dispatch_case(int m, gln_dtype_t dt, int64_t rows, int64_t cols, size_t skew_in, size_t skew_out,
                          const char *kernel, gln_rng_t *rng) {
    const gln_quant_config_t cfg = make_cfg(m, 3, 2);
    single_case(&cfg, dt, rows, cols, 1, 1, skew_in, skew_out, rng);
    const char *ran = gln_cuda_quant_last_kernel();
    CHECK_MSG(ran && strcmp(ran, kernel) == 0, "%s %s %lldx%lld skew in %zu out %zu ran on %s, want %s",
              m == M_CURRENT ? "current" : m == M_DELAYED ? "delayed" : "MXFP8", gln_dtype_name(dt), (long long)rows,
              (long long)cols, skew_in, skew_out, ran ? ran : "(none)", kernel);
}

/* The TMA kernel where it can take the pass, the general kernel where it cannot: FP32 input, an
 * input not 16-byte aligned, cols % 8 != 0; MXFP8 also misaligned outputs. */
static void test_dispatch(void) {
    gln_rng_t rng = gln_rng_seed(93);
    for (int m = M_CURRENT; m <= M_DELAYED; m++) {
        dispatch_case(m, GLN_DTYPE_BF16, 200, 512, 0, 0, "tq_tma_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_FP16, 129, 24, 0, 0, "tq_tma_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_BF16, 130, 264, 0, 4, "tq_tma_kernel", &rng); /* outputs any alignment */
        dispatch_case(m, GLN_DTYPE_FP32, 200, 512, 0, 0, "tq_general_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_BF16, 200, 512, 2, 0, "tq_general_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_FP16, 130, 36, 0, 0, "tq_general_kernel", &rng);
    }
    for (int m = M_MX_UP; m <= M_MX_FLOOR; m++) {
        dispatch_case(m, GLN_DTYPE_BF16, 200, 512, 0, 0, "mxq_tma_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_FP16, 129, 40, 0, 0, "mxq_tma_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_FP32, 200, 512, 0, 0, "mxq_general_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_BF16, 200, 512, 2, 0, "mxq_general_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_BF16, 200, 512, 0, 4, "mxq_general_kernel", &rng);
        dispatch_case(m, GLN_DTYPE_FP16, 130, 36, 0, 0, "mxq_general_kernel", &rng);
    }
}

/* The general kernels on the grouped and TMA-shaped cases through an input one element past a
 * 16-byte boundary, which the TMA kernels refuse (scalar loads): the same bytes. */
static void test_general(void) {
    g_misalign_input = 1;
    test_tma_shapes();
    test_grouped_dtypes();
    test_many_members();
    const char *ran = gln_cuda_quant_last_kernel();
    CHECK_MSG(ran && strstr(ran, "general_kernel"), "a misaligned input ran on %s", ran ? ran : "(none)");
    g_misalign_input = 0;
}

/* Every quantize grid capped at 1 and 3 blocks (read at every call): a block walks many tiles and
 * members, and the TMA kernel turns its stage ring many times; the general kernels too. */
static void test_grid_cap(void) {
    static const char *const blocks[] = {"1", "3"};
    for (size_t b = 0; b < COUNT(blocks); b++) {
        CHECK(setenv("GLN_CUDA_QUANT_GRID", blocks[b], 1) == 0);
        tensor_tma_cases();
        test_many_members(); /* 128 members, 256 columns: many member switches per block */
        test_graph();
        test_bad_splits();
        g_misalign_input = 1;
        test_grouped_dtypes();
        g_misalign_input = 0;
        CHECK(unsetenv("GLN_CUDA_QUANT_GRID") == 0);
    }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu,
    GLN_CASE(test_encode_sweep), GLN_CASE(test_single), GLN_CASE(test_grouped), GLN_CASE(test_grouped_dtypes),
    GLN_CASE(test_many_members), GLN_CASE(test_graph), GLN_CASE(test_bad_splits), GLN_CASE(tensor_tma_cases),
    GLN_CASE(test_dispatch), GLN_CASE(test_general), GLN_CASE(test_grid_cap))
