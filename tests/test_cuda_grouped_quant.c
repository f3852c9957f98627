/* The CUDA per-tensor (TENSOR: current and delayed scaling) and MXFP8 quantizers
 * (cuda_quant_group.cu) against the CPU reference, bit for bit: every data byte, every scale
 * (MXFP8 grid padding included), amax and scale, and every byte the quantizer must leave alone.
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
 *   - the per-tensor TMA kernels (gq_tensor4_kernel, the default for bf16 / fp16 with cols % 8 ==
 *     0 and an aligned input) on shapes of their own: columns 8 .. 264 that are and are not
 *     multiples of 16, 64 and 128 (a row's last chunk of 8 columns), members of 0 / 1 / 127 / 128 /
 *     129 / 300 rows (partial boxes loading the next member's rows, which must be masked), rows
 *     past the packed tensor (the box's zero fill), misaligned outputs (the stores' fallbacks);
 *   - the kernels' measurement variants (GLN_CUDA_QUANT_PIPE=0, GLN_CUDA_QUANT_REVERSE=0) on the
 *     grouped cases, the v1 MXFP8 kernel (GLN_CUDA_QUANT_MX=1) on the single and grouped
 *     cases, the v2 per-tensor cast kernels (GLN_CUDA_QUANT_V3=0: gq_tensor2_kernel where
 *     gq_tensor3_kernel or gq_tensor4_kernel is the default) on the encode sweep, the single,
 *     grouped and graph cases, and the register kernels instead of the TMA ones
 *     (GLN_CUDA_QUANT_TMA=0: v3 / v2) on all of those and the TMA shapes: the same bytes.
 * Outputs are poisoned (0xA5 data, 0xFF scales: NaN floats) on both backends and followed by
 * guard bytes on the device; a mismatch names the buffer, member, row, column, got and want.
 *
 * Skips (exit 77) without a CUDA device. */
#define _DEFAULT_SOURCE /* setenv */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h" /* every buffer: a host (CPU) and a device (CUDA) twin, poisoned alike */
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>

#include "tensor/scale_layout.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define DATA_POISON 0xA5u
#define SCALE_POISON 0xFFu
#define MAXM 160

static const gln_dtype_t k_hp[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* ---- inputs ---------------------------------------------------------------------------------- */

static void store_bits(void *h, gln_dtype_t dt, size_t i, uint32_t f32, uint16_t half) {
    if (dt == GLN_DTYPE_FP32) {
        memcpy((char *)h + 4 * i, &f32, 4);
    } else if (dt == GLN_DTYPE_BF16) {
        uint16_t b = (uint16_t)(f32 >> 16);
        memcpy((char *)h + 2 * i, &b, 2);
    } else {
        memcpy((char *)h + 2 * i, &half, 2);
    }
}

/* [rows, cols]: N(0, 1) times a per-row power of two (blocks and members get different scales),
 * some rows zero or tiny; with specials, scattered NaN (with payloads; negative ones only with
 * neg_nan), ±Inf, -0, values near the dtype's max, subnormals. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials, int neg_nan) {
    const size_t n = (size_t)rows * (size_t)cols;
    void *h = calloc(n ? n : 1, gln_dtype_size(dt));
    const double tiny = dt == GLN_DTYPE_FP16 ? 3e-8 : 1e-39, big = dt == GLN_DTYPE_FP16 ? 60000.0 : 1e38;
    for (int64_t r = 0; r < rows; r++) {
        const int kind = (int)gln_rng_int(rng, 0, 15);
        const double mag = kind == 0 ? 0.0 : kind == 1 ? tiny : ldexp(1.0, (int)gln_rng_int(rng, -12, 12));
        for (int64_t c = 0; c < cols; c++) gln_store(h, dt, (size_t)(r * cols + c), mag * gln_rng_normal(rng));
    }
    if (!specials || n == 0) return h;
    for (size_t k = 0; k < n / 60 + 3; k++) {
        const size_t i = (size_t)gln_rng_int(rng, 0, (int64_t)n - 1);
        switch (gln_rng_int(rng, 0, 7)) {
        case 0: store_bits(h, dt, i, 0x7FC12345u, 0x7E45u); break; /* +NaN, payload */
        case 1:
            if (neg_nan) store_bits(h, dt, i, 0xFFA00000u, 0xFD01u); /* -NaN (signalling payload) */
            break;
        case 2: store_bits(h, dt, i, 0x7F800000u, 0x7C00u); break; /* +Inf */
        case 3: store_bits(h, dt, i, 0xFF800000u, 0xFC00u); break; /* -Inf */
        case 4: store_bits(h, dt, i, 0x80000000u, 0x8000u); break; /* -0 */
        case 5: gln_store(h, dt, i, -big); break;
        case 6: gln_store(h, dt, i, big); break;
        default: store_bits(h, dt, i, 0x00000007u, 0x0003u); break; /* smallest subnormals */
        }
    }
    return h;
}

/* ---- where a byte lives (for the failure messages) -------------------------------------------- */

typedef struct layout {
    gln_scaling_mode_t mode;
    int32_t num;
    int64_t splits[MAXM];
    int64_t cols;
} layout_t;

enum { BUF_DATA, BUF_COL_DATA, BUF_SCALE, BUF_COL_SCALE, BUF_AMAX, BUF_ENC_SCALE };
static const char *k_buf_name[] = {"data", "col_data", "scale_inv", "col_scale_inv", "amax", "scale"};

static void layout_set(layout_t *L, gln_scaling_mode_t mode, int32_t num, const int64_t *splits, int64_t cols) {
    L->mode = mode, L->num = num, L->cols = cols;
    memcpy(L->splits, splits, (size_t)num * sizeof(int64_t));
}

/* "member i row r col c" of element (or scale) index e of buffer `buf`. */
static void describe(const layout_t *L, int buf, size_t e, char *out, size_t n) {
    if (buf >= BUF_AMAX || (L->mode == GLN_SCALING_TENSOR && buf >= BUF_SCALE)) {
        if ((int64_t)e < L->num) snprintf(out, n, "member %d (rows %lld)", (int)e, (long long)L->splits[e]);
        else snprintf(out, n, "past the last member (must be left alone)");
        return;
    }
    int64_t r0 = 0, s0 = 0;
    for (int32_t i = 0; i < L->num; i++) {
        const int64_t m = L->splits[i];
        if (buf == BUF_DATA || buf == BUF_COL_DATA) {
            if ((int64_t)e < (r0 + m) * L->cols) {
                const int64_t loc = (int64_t)e - r0 * L->cols;
                if (buf == BUF_COL_DATA && L->mode == GLN_SCALING_TENSOR) /* transposed [cols, m] */
                    snprintf(out, n, "member %d (rows %lld) transposed: col %lld row %lld", (int)i, (long long)m,
                             (long long)(loc / m), (long long)(loc % m));
                else
                    snprintf(out, n, "member %d (rows %lld) row %lld col %lld", (int)i, (long long)m,
                             (long long)(loc / L->cols), (long long)(loc % L->cols));
                return;
            }
        } else {
            const int cw = buf == BUF_COL_SCALE;
            int64_t gr, gc;
            gln_scale_grid(L->mode, m, L->cols, cw, &gr, &gc);
            if ((int64_t)e < s0 + gr * gc) {
                const int64_t loc = (int64_t)e - s0;
                snprintf(out, n, "member %d (rows %lld) %s E8M0 grid [%lld x %lld] entry (%lld, %lld)%s", (int)i,
                         (long long)m, cw ? "columnwise" : "rowwise", (long long)gr, (long long)gc,
                         (long long)(loc / gc), (long long)(loc % gc),
                         (cw ? loc / gc >= gln_ceil_div(m, 32) || loc % gc >= L->cols
                             : loc / gc >= m || loc % gc >= gln_ceil_div(L->cols, 32))
                             ? " (padding: must be 0)"
                             : "");
                return;
            }
            s0 += gr * gc;
        }
        r0 += m;
    }
    snprintf(out, n, "past the last member (must be left alone)");
}

typedef struct where {
    const layout_t *L;
    int buf;
} where_t;

static void describe_at(const void *arg, size_t e, char *out, size_t n) {
    const where_t *w = arg;
    describe(w->L, w->buf, e, out, n);
}

/* Device bytes of t equal the CPU's (t.h); the first mismatch is described, with the count. */
static void twin_check(const gln_twin_t *t, const layout_t *L, int buf, size_t es, const char *what) {
    const where_t w = {L, buf};
    gln_twin_check(g_cu, t, es, what, k_buf_name[buf], describe_at, &w);
}

/* ---- one quantized output: data, scales, and TENSOR's amax / scale arrays --------------------- */

typedef struct qout {
    gln_twin_t q, qt, s, cs, amax, scale;
    size_t es; /* bytes of a scale_inv element: 4 (TENSOR), 1 (MXFP8) */
} qout_t;

/* TENSOR: amax0 / scale0 (num each) are the initial amax / scale values, or NULL for no buffer
 * (current scaling then uses its own scratch). */
static qout_t qout_new(const gln_quant_config_t *cfg, size_t nd, size_t ns, size_t ncs, int32_t num,
                       const float *amax0, const float *scale0, size_t skew) {
    qout_t o;
    memset(&o, 0, sizeof o);
    o.es = cfg->mode == GLN_SCALING_TENSOR ? 4 : 1;
    if (cfg->rowwise) {
        o.q = gln_twin_new(g_cu, nd, DATA_POISON, skew);
        o.s = gln_twin_new(g_cu, ns * o.es, SCALE_POISON, 0);
    }
    if (cfg->columnwise) {
        o.qt = gln_twin_new(g_cu, nd, DATA_POISON, skew);
        o.cs = gln_twin_new(g_cu, ncs * o.es, SCALE_POISON, 0);
    }
    if (amax0) o.amax = gln_twin_input(g_cu, amax0, (size_t)num * sizeof(float), 0);
    if (scale0) o.scale = gln_twin_input(g_cu, scale0, (size_t)num * sizeof(float), 0);
    return o;
}

static gln_tensor_t qout_tensor(const gln_quant_config_t *cfg, qout_t *o, int64_t rows, int64_t cols, int dev) {
    gln_tensor_t t = {cfg->fp8_dtype, rows, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    t.data = dev ? o->q.d : o->q.h;
    t.scale_inv = dev ? o->s.d : o->s.h;
    t.col_data = dev ? o->qt.d : o->qt.h;
    t.col_scale_inv = dev ? o->cs.d : o->cs.h;
    t.amax = (float *)(dev ? o->amax.d : o->amax.h);
    t.scale = (float *)(dev ? o->scale.d : o->scale.h);
    return t;
}

static void qout_check(const qout_t *o, const layout_t *L, const char *what) {
    twin_check(&o->q, L, BUF_DATA, 1, what);
    twin_check(&o->qt, L, BUF_COL_DATA, 1, what);
    twin_check(&o->s, L, BUF_SCALE, o->es, what);
    twin_check(&o->cs, L, BUF_COL_SCALE, o->es, what);
    twin_check(&o->amax, L, BUF_AMAX, 4, what);
    twin_check(&o->scale, L, BUF_ENC_SCALE, 4, what);
}

static void qout_free(qout_t *o) {
    gln_twin_free(g_cu, &o->q), gln_twin_free(g_cu, &o->s);
    gln_twin_free(g_cu, &o->qt), gln_twin_free(g_cu, &o->cs);
    gln_twin_free(g_cu, &o->amax), gln_twin_free(g_cu, &o->scale);
}

/* ---- configurations ------------------------------------------------------------------------- */

enum { M_CURRENT, M_DELAYED, M_MX_UP, M_MX_FLOOR, M_COUNT };

/* Mode kind m, copies (1 R, 2 C, 3 RC), variant v (0..7): E4M3 / E5M2, NaN rule, and for current
 * scaling power-of-two scales and an amax epsilon. */
static gln_quant_config_t make_cfg(int m, int copies, int v) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = m <= M_DELAYED ? GLN_SCALING_TENSOR : GLN_SCALING_MXFP8_1D;
    cfg.delayed = m == M_DELAYED;
    cfg.e8m0_rounding = m == M_MX_FLOOR ? GLN_E8M0_ROUND_FLOOR : GLN_E8M0_ROUND_UP;
    cfg.rowwise = copies & 1;
    cfg.columnwise = (copies >> 1) & 1;
    cfg.fp8_dtype = v & 4 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    cfg.amax_nan_propagate = (v >> 1) & 1;
    if (m == M_CURRENT) {
        cfg.power_2_scale = v & 1;
        cfg.amax_epsilon = v == 5 ? 1e-3f : 0.0f;
    }
    return cfg;
}

static void cfg_name(const gln_quant_config_t *cfg, gln_dtype_t dt, char *out, size_t n) {
    snprintf(out, n, "%s%s %s->%s %s%s%s%s eps %g", gln_scaling_name(cfg->mode),
             cfg->mode == GLN_SCALING_TENSOR ? (cfg->delayed ? " delayed" : " current")
                                              : (cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR ? " floor" : " round-up"),
             gln_dtype_name(dt), gln_dtype_name(cfg->fp8_dtype), cfg->rowwise ? "R" : "", cfg->columnwise ? "C" : "",
             cfg->power_2_scale ? " pow2" : "", cfg->amax_nan_propagate ? " nan-propagate" : "",
             (double)cfg->amax_epsilon);
}

/* A negative NaN may meet a NaN MXFP8 decode multiplier (code 0xFF, nan_propagate only); which
 * NaN the host's x86 multiply returns there depends on its compiler's operand order. */
static int neg_nan_ok(const gln_quant_config_t *cfg) {
    return !(cfg->mode == GLN_SCALING_MXFP8_1D && cfg->amax_nan_propagate);
}

/* Initial per-member amax / scale for TENSOR: delayed gets awkward scales (not powers of two) and
 * prior amaxes to max with; current alternates the caller's buffers with none. */
static void tensor_state(const gln_quant_config_t *cfg, int32_t num, int with_buffers, float *amax0, float *scale0,
                         const float **pa, const float **ps) {
    *pa = *ps = NULL;
    if (cfg->mode != GLN_SCALING_TENSOR) return;
    for (int32_t i = 0; i < num; i++) {
        amax0[i] = 0.37f * (float)(i % 7);
        scale0[i] = i % 5 == 3 ? 0.0078125f : 20.0f + 7.3f * (float)(i % 11);
    }
    if (cfg->delayed || with_buffers) *pa = amax0, *ps = scale0;
}

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

/* ---- one tensor ------------------------------------------------------------------------------ */

/* gln_quantize on both backends; skew_in / skew_out misalign the device input / outputs. */
static void single_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int64_t rows, int64_t cols, int specials,
                        int with_buffers, size_t skew_in, size_t skew_out, gln_rng_t *rng) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &lay));
    void *h = make_input(rng, dt, rows, cols, specials, neg_nan_ok(cfg));
    const size_t nx = (size_t)rows * (size_t)cols * gln_dtype_size(dt);
    float amax0[1], scale0[1];
    const float *pa, *ps;
    tensor_state(cfg, 1, with_buffers, amax0, scale0, &pa, &ps);
    gln_twin_t x = gln_twin_input(g_cu, h, nx, skew_in);
    const size_t es = cfg->mode == GLN_SCALING_TENSOR ? 4 : 1;
    qout_t o = qout_new(cfg, lay.data_bytes, lay.scale_bytes / es, lay.col_scale_bytes / es, 1, pa, ps, skew_out);
    gln_tensor_t hin = gln_tensor_make(dt, rows, cols, x.h), din = gln_tensor_make(dt, rows, cols, x.d);
    gln_tensor_t hq = qout_tensor(cfg, &o, rows, cols, 0), dq = qout_tensor(cfg, &o, rows, cols, 1);
    CHECK_OK(gln_quantize(g_cpu, cfg, &hin, &hq));
    CHECK_OK(gln_quantize(g_cu, cfg, &din, &dq));
    char what[300], c[160];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "quantize %lldx%lld %s%s%s%s%s", (long long)rows, (long long)cols, c,
             specials ? " specials" : "", pa || cfg->mode != GLN_SCALING_TENSOR ? "" : " (no amax/scale buffers)",
             skew_in ? " misaligned-in" : "", skew_out ? " misaligned-out" : "");
    layout_t L;
    layout_set(&L, cfg->mode, 1, &rows, cols);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &x);
    free(h);
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

/* ---- grouped ------------------------------------------------------------------------------------ */

typedef struct gcase {
    const gln_quant_config_t *cfg;
    gln_dtype_t dt;
    int32_t num;
    const int64_t *splits;
    int64_t rows, cols; /* packed rows >= Σ splits */
} gcase_t;

static int64_t splits_sum(int32_t num, const int64_t *splits) {
    int64_t s = 0;
    for (int32_t i = 0; i < num; i++) s += splits[i];
    return s;
}

static void gcase_name(const gcase_t *g, const char *how, char *out, size_t n) {
    char c[160], sp[200] = "";
    cfg_name(g->cfg, g->dt, c, sizeof c);
    for (int32_t i = 0; i < g->num && strlen(sp) < sizeof sp - 24; i++)
        snprintf(sp + strlen(sp), sizeof sp - strlen(sp), "%s%lld", i ? "," : "", (long long)g->splits[i]);
    snprintf(out, n, "grouped %s splits {%s} (%d members) rows %lld cols %lld %s", c, sp, (int)g->num,
             (long long)g->rows, (long long)g->cols, how);
}

/* Scale buffers sized for any splits of these rows (as a graph-safe caller would). */
static void scale_bounds(const gcase_t *g, size_t *ns, size_t *ncs) {
    int64_t r = 0, c = 0;
    CHECK_OK(gln_grouped_scale_bound(g->cfg->mode, g->num, g->rows, g->cols, &r, &c));
    *ns = (size_t)r, *ncs = (size_t)c;
}

/* The CPU's grouped quantize of x.h into o's host twins. */
static void grouped_ref(const gcase_t *g, gln_twin_t *x, qout_t *o) {
    gln_grouped_tensor_t hin = {g->num, g->splits, 0, gln_tensor_make(g->dt, g->rows, g->cols, x->h)};
    gln_grouped_tensor_t hout = {g->num, g->splits, 0, qout_tensor(g->cfg, o, g->rows, g->cols, 0)};
    CHECK_OK(gln_grouped_quantize(g_cpu, g->cfg, &hin, &hout));
}

/* The CUDA grouped quantize; out_splits: out's own copy (NULL: in's). */
static void grouped_dev(const gcase_t *g, const int64_t *splits, const int64_t *out_splits, int dev_splits,
                        gln_twin_t *x, qout_t *o) {
    gln_grouped_tensor_t din = {g->num, splits, dev_splits, gln_tensor_make(g->dt, g->rows, g->cols, x->d)};
    gln_grouped_tensor_t dout = {g->num, out_splits ? out_splits : splits, dev_splits,
                                 qout_tensor(g->cfg, o, g->rows, g->cols, 1)};
    CHECK_OK(gln_grouped_quantize(g_cu, g->cfg, &din, &dout));
}

/* how: 0 host splits, 1 device splits, 2 device splits with a separate copy for out. */
static void grouped_case(const gcase_t *g, int how, int specials, int with_buffers, gln_rng_t *rng) {
    const size_t nd = (size_t)g->rows * (size_t)g->cols;
    void *h = make_input(rng, g->dt, g->rows, g->cols, specials, neg_nan_ok(g->cfg));
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(g->dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, g->splits, (size_t)g->num * sizeof(int64_t), 0);
    gln_twin_t sp2 = gln_twin_input(g_cu, g->splits, (size_t)g->num * sizeof(int64_t), 0);
    float *amax0 = malloc((size_t)g->num * sizeof(float)), *scale0 = malloc((size_t)g->num * sizeof(float));
    const float *pa, *ps;
    tensor_state(g->cfg, g->num, with_buffers, amax0, scale0, &pa, &ps);
    size_t ns, ncs;
    scale_bounds(g, &ns, &ncs);
    qout_t o = qout_new(g->cfg, nd, ns, ncs, g->num, pa, ps, 0);
    grouped_ref(g, &x, &o);
    grouped_dev(g, how ? (const int64_t *)sp.d : g->splits, how == 2 ? (const int64_t *)sp2.d : NULL, how > 0, &x,
                &o);
    CHECK_OK(gln_context_async_error(g_cu));
    char what[480];
    static const char *hows[] = {"(host splits)", "(device splits)", "(device splits, out's own copy)"};
    gcase_name(g, hows[how], what, sizeof what);
    if (g->cfg->mode == GLN_SCALING_TENSOR && !pa) strncat(what, " (no amax/scale buffers)", sizeof what - strlen(what) - 1);
    layout_t L;
    layout_set(&L, g->cfg->mode, g->num, g->splits, g->cols);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &sp2);
    gln_twin_free(g_cu, &sp);
    gln_twin_free(g_cu, &x);
    free(amax0), free(scale0);
    free(h);
}

static const int64_t k_sp_awkward[] = {0, 1, 5, 17, 129, 300};
static const int64_t k_sp_one[] = {0, 452, 0};
static const int64_t k_sp_16[] = {16, 32, 0, 256, 128, 48};
static const int64_t k_sp_4[] = {20, 132, 4, 0, 8};
static const int64_t k_sp_single[] = {7};
static const int64_t k_sp_empty[] = {0, 0, 0};

typedef struct splits_set {
    int32_t num;
    const int64_t *splits;
} splits_set_t;
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
    test_tma_shapes(); /* the TMA kernels' shapes (main's case list is the harness's) */
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

/* The per-tensor TMA kernels' own shapes (they take bf16 / fp16 with cols % 8 == 0, where v3 took
 * cols % 16 == 0): current and delayed scaling, R / C / RC, E4M3 / E5M2, both NaN rules, NaN / Inf
 * inputs, every kind of splits; members of 0 / 1 / 127 / 128 / 129 / 300 rows (a box starting in a
 * member's last partial row tile loads the next member's rows: they must not reach the amax or the
 * stores), 3 packed rows past the members on some (the box's zero fill past the tensor is never
 * reached there, but rows past the members are), columns below one box (8, 24, 40), a row's last
 * chunk of 8 columns (24, 40, 136, 264), multiples of 128 (384), and one tensor with misaligned
 * outputs (the stores' 8-byte and narrower fallbacks).  GLN_CUDA_QUANT_TMA=0 runs the same on v3 /
 * v2 (test_kernel_variants). */
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

/* ---- CUDA graph --------------------------------------------------------------------------------- */

enum { GR_N = 5, GR_ROWS = 400, GR_COLS = 320 };
static const int64_t k_graph_sets[][GR_N] = {
    {100, 0, 37, 263, 0}, {0, 0, 400, 0, 0}, {1, 128, 16, 255, 0}, {0, 0, 0, 0, 0}, {5, 17, 129, 1, 200}};

/* TENSOR current, TENSOR delayed and MXFP8 grouped quantizes with device splits captured once on a
 * caller's stream; replayed with other splits; each replay equals the CPU. */
static void test_graph(void) {
    gln_rng_t rng = gln_rng_seed(75);
    const gln_quant_config_t cfgs[3] = {make_cfg(M_CURRENT, 3, 1), make_cfg(M_DELAYED, 3, 2), make_cfg(M_MX_UP, 3, 4)};
    const gln_dtype_t dt = GLN_DTYPE_BF16;
    const size_t nd = (size_t)GR_ROWS * GR_COLS;
    void *h = make_input(&rng, dt, GR_ROWS, GR_COLS, 1, 0);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, k_graph_sets[0], sizeof k_graph_sets[0], 0);
    float amax0[GR_N], scale0[GR_N];
    qout_t o[3];
    gcase_t g[3];
    for (int k = 0; k < 3; k++) {
        const float *pa, *ps;
        tensor_state(&cfgs[k], GR_N, 1, amax0, scale0, &pa, &ps);
        g[k] = (gcase_t){&cfgs[k], dt, GR_N, k_graph_sets[0], GR_ROWS, GR_COLS};
        size_t ns, ncs;
        scale_bounds(&g[k], &ns, &ncs);
        o[k] = qout_new(&cfgs[k], nd, ns, ncs, GR_N, pa, ps, 0);
    }
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    CHECK_OK(gln_context_set_stream(g_cu, stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    for (int k = 0; k < 3; k++) grouped_dev(&g[k], (const int64_t *)sp.d, NULL, 1, &x, &o[k]);
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (size_t s = 0; s < COUNT(k_graph_sets) && exec; s++) {
        CHECK_OK(gln_memcpy(g_cu, sp.d, k_graph_sets[s], sizeof k_graph_sets[s], GLN_COPY_HOST_TO_BACKEND));
        for (int k = 0; k < 3; k++) {
            g[k].splits = k_graph_sets[s];
            gln_twin_repoison(g_cu, &o[k].q, DATA_POISON), gln_twin_repoison(g_cu, &o[k].qt, DATA_POISON);
            gln_twin_repoison(g_cu, &o[k].s, SCALE_POISON), gln_twin_repoison(g_cu, &o[k].cs, SCALE_POISON);
            if (o[k].amax.h) { /* delayed accumulates: the same starting state on both */
                const float *pa, *ps;
                tensor_state(&cfgs[k], GR_N, 1, amax0, scale0, &pa, &ps);
                gln_twin_set(g_cu, &o[k].amax, amax0), gln_twin_set(g_cu, &o[k].scale, scale0);
            }
            grouped_ref(&g[k], &x, &o[k]);
        }
        CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess);
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
        CHECK_OK(gln_context_async_error(g_cu));
        for (int k = 0; k < 3; k++) {
            char what[480];
            gcase_name(&g[k], "(CUDA graph replay, device splits)", what, sizeof what);
            layout_t L;
            layout_set(&L, cfgs[k].mode, GR_N, k_graph_sets[s], GR_COLS);
            qout_check(&o[k], &L, what);
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_set_stream(g_cu, NULL));
    if (stream) cudaStreamDestroy(stream);
    for (int k = 0; k < 3; k++) qout_free(&o[k]);
    gln_twin_free(g_cu, &sp);
    gln_twin_free(g_cu, &x);
    free(h);
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

/* The measurement variants of the kernels (GLN_CUDA_QUANT_PIPE=0: load-then-use loop;
 * GLN_CUDA_QUANT_REVERSE=0: current scaling's cast pass in forward order; GLN_CUDA_QUANT_MX=1:
 * the v1 MXFP8 kernel; GLN_CUDA_QUANT_V3=0: the v2 per-tensor cast kernels;
 * GLN_CUDA_QUANT_TMA=0: the register kernels instead of the TMA ones), read at every call: the
 * same bytes as the defaults. */
static void test_kernel_variants(void) {
    static const char *vars[] = {"GLN_CUDA_QUANT_PIPE", "GLN_CUDA_QUANT_REVERSE"};
    for (size_t k = 0; k < COUNT(vars); k++) {
        CHECK(setenv(vars[k], "0", 1) == 0);
        test_grouped_dtypes();
        test_many_members();
        CHECK(unsetenv(vars[k]) == 0);
    }
    /* GLN_CUDA_QUANT_MX=1: every MXFP8 pass on the v1 kernel (gq_mx_kernel) rather than
     * gq_mx2_kernel; the single-tensor cases too, for their NaN / Inf blocks */
    CHECK(setenv("GLN_CUDA_QUANT_MX", "1", 1) == 0);
    test_single();
    test_grouped_dtypes();
    test_many_members();
    CHECK(setenv("GLN_CUDA_QUANT_PIPE", "0", 1) == 0); /* v1's load-then-use loop */
    test_grouped_dtypes();
    CHECK(unsetenv("GLN_CUDA_QUANT_PIPE") == 0);
    CHECK(unsetenv("GLN_CUDA_QUANT_MX") == 0);
    /* GLN_CUDA_QUANT_V3=0: the per-tensor cast passes of bf16 / fp16 on gq_tensor2_kernel rather
     * than gq_tensor3_kernel (NaN / Inf inputs and the NaN sign rule in the sweep and the
     * specials cases, partial tiles, grouped members of any size, host and device splits) */
    CHECK(setenv("GLN_CUDA_QUANT_V3", "0", 1) == 0);
    test_encode_sweep();
    test_single();
    test_grouped_dtypes();
    test_many_members();
    test_graph();
    test_tma_shapes();
    CHECK(unsetenv("GLN_CUDA_QUANT_V3") == 0);
    /* GLN_CUDA_QUANT_TMA=0: every per-tensor pass that gq_tensor4_kernel takes by default on v3
     * (cast passes with cols % 16 == 0) or v2 (the amax pass, cols % 16 == 8) instead */
    CHECK(setenv("GLN_CUDA_QUANT_TMA", "0", 1) == 0);
    test_encode_sweep();
    test_single();
    test_grouped_dtypes();
    test_many_members();
    test_graph();
    test_tma_shapes();
    CHECK(unsetenv("GLN_CUDA_QUANT_TMA") == 0);
}

/* ---- MXFP8 v3 (gq_mx3_kernel: the TMA load pipeline) ------------------------------------------
 * The default MXFP8 kernel for bf16 / fp16 input with cols % 8 == 0 and 16-byte aligned buffers
 * (every twin buffer here).  Its cases: every 16-bit input pattern, single tensors and groups of
 * awkward shapes (cols 8 / 40 / 136 / 264: a row's last chunk half full, 8-byte stores; 128 /
 * 256 / 392 / 1032; members of 0, 1, 31, 33, 127, 128, 129, 300 rows), NaN / Inf, E4M3 / E5M2,
 * both E8M0 rules, both NaN rules, one or both copies, host and device splits, trailing packed
 * rows, compact and swizzled grids.  test_mx3_variants runs them with GLN_CUDA_QUANT_MX=3 (v3
 * required: a case it did not take fails), =2 (v2, or v1 where v2 does not apply) and =1 (v1),
 * and with grids of 1 and 3 blocks (GLN_CUDA_QUANT_MX_BLOCKS) so that a block walks many tiles,
 * members and turns of its stage ring; and every earlier MXFP8 case of this file on v2. */
#include "backend/cuda/cuda_backend.h" /* gln_cuda_grouped_quantize_mxfp8_swizzled */

static const gln_dtype_t k_mx3_dt[] = {GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* MXFP8 of a given host input [rows, cols] on both backends. */
static void mx3_input_case(const gln_quant_config_t *cfg, gln_dtype_t dt, const void *h, int64_t rows, int64_t cols,
                           const char *label) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &lay));
    gln_twin_t x = gln_twin_input(g_cu, h, (size_t)rows * (size_t)cols * gln_dtype_size(dt), 0);
    qout_t o = qout_new(cfg, lay.data_bytes, lay.scale_bytes, lay.col_scale_bytes, 1, NULL, NULL, 0);
    gln_tensor_t hin = gln_tensor_make(dt, rows, cols, x.h), din = gln_tensor_make(dt, rows, cols, x.d);
    gln_tensor_t hq = qout_tensor(cfg, &o, rows, cols, 0), dq = qout_tensor(cfg, &o, rows, cols, 1);
    CHECK_OK(gln_quantize(g_cpu, cfg, &hin, &hq));
    CHECK_OK(gln_quantize(g_cu, cfg, &din, &dq));
    char what[300], c[160];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "%s %lldx%lld %s", label, (long long)rows, (long long)cols, c);
    layout_t L;
    layout_set(&L, cfg->mode, 1, &rows, cols);
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &x);
}

/* Every bf16 / fp16 bit pattern (NaN payloads and signs, ±Inf, subnormals) in rows of 1024 and of
 * 40 columns (half-full last chunks), consecutive patterns sharing a block; the NaN rule off,
 * since negative NaNs meet NaN multipliers under it (neg_nan_ok). */
static void test_mx3_sweep(void) {
    const int64_t rows40 = 65536 / 40 + 1;
    uint16_t *b = malloc((size_t)rows40 * 40 * 2);
    for (uint32_t i = 0; i < (uint32_t)(rows40 * 40); i++) b[i] = (uint16_t)i;
    for (size_t d = 0; d < COUNT(k_mx3_dt); d++)
        for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
            for (int e5 = 0; e5 < 2; e5++) {
                const gln_quant_config_t cfg = make_cfg(m, 3, e5 ? 4 : 0);
                mx3_input_case(&cfg, k_mx3_dt[d], b, 64, 1024, "MXFP8 sweep of every 16-bit input");
                mx3_input_case(&cfg, k_mx3_dt[d], b, rows40, 40, "MXFP8 sweep of every 16-bit input");
            }
    free(b);
}

static void test_mx3_single(void) {
    static const int64_t shapes[][2] = {{1, 8},    {3, 40},   {129, 24}, {130, 264}, {31, 136},
                                        {33, 8},   {300, 392}, {128, 128}, {127, 1032}, {257, 64}};
    gln_rng_t rng = gln_rng_seed(81);
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg = make_cfg(m, copies, v);
                    const gln_dtype_t dt = k_mx3_dt[(s + (size_t)copies + (size_t)v) % COUNT(k_mx3_dt)];
                    single_case(&cfg, dt, shapes[s][0], shapes[s][1], v >= 2, 0, 0, 0, &rng);
                }
}

static const int64_t k_mx3_sp_awkward[] = {0, 1, 31, 33, 127, 129, 300};
static const int64_t k_mx3_sp_tiles[] = {128, 0, 129, 1, 256};
static const int64_t k_mx3_sp_one[] = {300};
static const int64_t k_mx3_sp_empty[] = {0, 0};
static const splits_set_t k_mx3_sets[] = {
    {7, k_mx3_sp_awkward}, {5, k_mx3_sp_tiles}, {1, k_mx3_sp_one}, {2, k_mx3_sp_empty}};

static void test_mx3_grouped(void) {
    static const int64_t cols[] = {8, 40, 136, 264, 128, 256};
    gln_rng_t rng = gln_rng_seed(82);
    for (size_t s = 0; s < COUNT(k_mx3_sets); s++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int m = M_MX_UP; m <= M_MX_FLOOR; m++)
                for (int copies = 1; copies <= 3; copies++)
                    for (int v = 0; v < 8; v += 1 + (int)((s + c + (size_t)copies) % 2)) {
                        const gln_quant_config_t cfg = make_cfg(m, copies, v);
                        const int64_t sum = splits_sum(k_mx3_sets[s].num, k_mx3_sets[s].splits);
                        gcase_t g = {&cfg, k_mx3_dt[(s + c + (size_t)v) % COUNT(k_mx3_dt)], k_mx3_sets[s].num,
                                     k_mx3_sets[s].splits, sum + (v & 1) * 5, cols[c]};
                        grouped_case(&g, (v + copies + m) % 3, v >= 2, 0, &rng);
                    }
}

/* The grouped quantize with both grids swizzled by the kernel against the CPU's compact grids
 * swizzled member by member (gln_mxfp8_swizzle_scales at each member's offset). */
static void mx3_swizzled_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int32_t num, const int64_t *splits,
                              int64_t cols, int dev_splits, gln_rng_t *rng) {
    const int64_t rows = splits_sum(num, splits);
    const size_t nd = (size_t)rows * (size_t)cols;
    void *h = make_input(rng, dt, rows, cols, 1, neg_nan_ok(cfg));
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, splits, (size_t)num * sizeof(int64_t), 0);
    int64_t sr = 0, sc = 0;
    CHECK_OK(gln_grouped_scale_bound(cfg->mode, num, rows, cols, &sr, &sc));
    gln_twin_t q = gln_twin_new(g_cu, nd, DATA_POISON, 0), qt = gln_twin_new(g_cu, nd, DATA_POISON, 0);
    gln_twin_t s = gln_twin_new(g_cu, (size_t)sr, SCALE_POISON, 0), cs = gln_twin_new(g_cu, (size_t)sc, SCALE_POISON, 0);
    uint8_t *s_compact = malloc((size_t)sr + 1), *cs_compact = malloc((size_t)sc + 1);
    memcpy(s_compact, s.h, (size_t)sr), memcpy(cs_compact, cs.h, (size_t)sc);
    gln_grouped_tensor_t hin = {num, splits, 0, gln_tensor_make(dt, rows, cols, x.h)};
    gln_grouped_tensor_t hout = {num, splits, 0,
                                 {cfg->fp8_dtype, rows, cols, q.h, cfg->mode, s_compact, qt.h, cs_compact, NULL, NULL}};
    CHECK_OK(gln_grouped_quantize(g_cpu, cfg, &hin, &hout));
    int64_t *ro = malloc((size_t)(num + 1) * sizeof *ro), *co = malloc((size_t)(num + 1) * sizeof *co);
    CHECK_OK(gln_grouped_scale_offsets(cfg->mode, num, splits, cols, ro, co));
    for (int32_t i = 0; i < num; i++) {
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 0, s_compact + ro[i], (uint8_t *)s.h + ro[i]));
        CHECK_OK(gln_mxfp8_swizzle_scales(g_cpu, splits[i], cols, 1, cs_compact + co[i], (uint8_t *)cs.h + co[i]));
    }
    gln_grouped_tensor_t din = {num, dev_splits ? (const int64_t *)sp.d : splits, dev_splits,
                                gln_tensor_make(dt, rows, cols, x.d)};
    gln_grouped_tensor_t dout = din;
    const gln_tensor_t td = {cfg->fp8_dtype, rows, cols, q.d, cfg->mode, s.d, qt.d, cs.d, NULL, NULL};
    dout.packed = td;
    CHECK_OK(gln_cuda_grouped_quantize_mxfp8_swizzled(g_cu, cfg, &din, &dout));
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    char what[300], c[160];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "swizzled grids %s, %d members, %lld cols, %s splits", c, (int)num, (long long)cols,
             dev_splits ? "device" : "host");
    gln_twin_check(g_cu, &q, 1, what, "data", NULL, NULL);
    gln_twin_check(g_cu, &qt, 1, what, "col_data", NULL, NULL);
    gln_twin_check(g_cu, &s, 1, what, "scale_inv (swizzled)", NULL, NULL);
    gln_twin_check(g_cu, &cs, 1, what, "col_scale_inv (swizzled)", NULL, NULL);
    gln_twin_t *all[] = {&x, &sp, &q, &qt, &s, &cs};
    for (size_t k = 0; k < COUNT(all); k++) gln_twin_free(g_cu, all[k]);
    free(ro), free(co), free(s_compact), free(cs_compact), free(h);
}

static void test_mx3_swizzled(void) {
    static const int64_t cols[] = {8, 40, 136, 264, 256};
    gln_rng_t rng = gln_rng_seed(83);
    int turn = 0;
    for (size_t c = 0; c < COUNT(cols); c++)
        for (size_t s = 0; s < COUNT(k_mx3_sets); s++, turn++) {
            const int m = turn & 1 ? M_MX_FLOOR : M_MX_UP;
            const gln_quant_config_t cfg = make_cfg(m, 3, (turn * 3) & 7);
            mx3_swizzled_case(&cfg, k_mx3_dt[turn % 2], k_mx3_sets[s].num, k_mx3_sets[s].splits, cols[c], (turn >> 1) & 1,
                              &rng);
        }
}

/* The v3 cases again, required (=3) and on the other kernels (=2, =1); on capped grids; and the
 * earlier MXFP8 cases of this file on v2 (they ran on v3 by default where it applies). */
static void test_mx3_variants(void) {
    static const char *const mx[] = {"3", "2", "1"};
    for (size_t k = 0; k < COUNT(mx); k++) {
        CHECK(setenv("GLN_CUDA_QUANT_MX", mx[k], 1) == 0);
        test_mx3_sweep();
        test_mx3_single();
        test_mx3_grouped();
        test_mx3_swizzled();
        if (k == 0) test_graph(); /* bf16, 320 columns: v3 in a CUDA graph, splits changed between replays */
        CHECK(unsetenv("GLN_CUDA_QUANT_MX") == 0);
    }
    static const char *const blocks[] = {"1", "3"};
    CHECK(setenv("GLN_CUDA_QUANT_MX", "3", 1) == 0);
    for (size_t k = 0; k < COUNT(blocks); k++) {
        CHECK(setenv("GLN_CUDA_QUANT_MX_BLOCKS", blocks[k], 1) == 0);
        test_mx3_single();
        test_mx3_grouped();
        test_mx3_swizzled();
        test_graph();
        CHECK(unsetenv("GLN_CUDA_QUANT_MX_BLOCKS") == 0);
    }
    CHECK(unsetenv("GLN_CUDA_QUANT_MX") == 0);
    CHECK(setenv("GLN_CUDA_QUANT_MX", "2", 1) == 0);
    test_single();
    test_grouped();
    test_grouped_dtypes();
    test_many_members();
    test_graph();
    test_bad_splits();
    CHECK(unsetenv("GLN_CUDA_QUANT_MX") == 0);
}


/* ---- per-tensor v4 tilings (gq_tensor4_kernel<TC>) --------------------------------------------
 * The per-tensor cases that gq_tensor4_kernel takes (bf16 / fp16, cols % 8 == 0, aligned input)
 * with GLN_CUDA_QUANT_TMA=2 (v4 required: a pass it did not take fails the call), on both tilings
 * (GLN_CUDA_QUANT_TC=128: two boxes a tile, the second not issued where a tile holds <= 64
 * columns of the tensor; =64: one box) and on grids capped at 1 and 3 blocks
 * (GLN_CUDA_QUANT_TMA_BLOCKS) so that a block walks many tiles and members and turns its stage
 * ring many times: current and delayed scaling, E4M3 / E5M2, both NaN rules, R / C / RC, NaN /
 * Inf inputs, columns 8 / 24 / 40 (less than one box), 136 / 264 (a last tile of 8 columns; a
 * row's last chunk of 8), 1032 (9 tiles of 128, the last of 8 columns), rows 1 / 3 / 129 / 130,
 * members of 0 / 1 / 31 / 33 / 127 / 129 / 300 rows with trailing packed rows, host and device
 * splits, a CUDA graph; every byte against the CPU; the scale step fused into the amax pass's
 * last block (the default) and as its own kernel (GLN_CUDA_QUANT_FUSED_SCALE=0).  And the
 * refusals of the required mode. */

static const int64_t k_t4_sp_awkward[] = {0, 1, 31, 33, 127, 129, 300};
static const int64_t k_t4_sp_tail[] = {129, 0, 130, 3};

static void tensor4_cases(void) {
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
                    const int64_t sum = splits_sum(COUNT(k_t4_sp_awkward), k_t4_sp_awkward);
                    gcase_t g = {&cfg, dt, COUNT(k_t4_sp_awkward), k_t4_sp_awkward, sum + (v & 2 ? 5 : 0), cols[c]};
                    grouped_case(&g, (v + copies + m) % 3, v >= 2, (v >> 2) & 1, &rng);
                    if (copies == 3) {
                        gcase_t t = {&cfg, dt, COUNT(k_t4_sp_tail), k_t4_sp_tail, 262 + (v & 1), cols[c]};
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

/* Under GLN_CUDA_QUANT_TMA=2, a per-tensor pass v4 cannot take fails naming the reason. */
static void tensor4_refusal(gln_dtype_t dt, int64_t rows, int64_t cols, size_t skew_in, const char *needle) {
    const gln_quant_config_t cfg = make_cfg(M_CURRENT, 3, 0);
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(cfg.mode, cfg.fp8_dtype, rows, cols, &lay));
    gln_rng_t rng = gln_rng_seed(92);
    void *h = make_input(&rng, dt, rows, cols, 0, 1);
    gln_twin_t x = gln_twin_input(g_cu, h, (size_t)rows * (size_t)cols * gln_dtype_size(dt), skew_in);
    qout_t o = qout_new(&cfg, lay.data_bytes, lay.scale_bytes / 4, lay.col_scale_bytes / 4, 1, NULL, NULL, 0);
    gln_tensor_t din = gln_tensor_make(dt, rows, cols, x.d), dq = qout_tensor(&cfg, &o, rows, cols, 1);
    CHECK_STATUS(gln_quantize(g_cu, &cfg, &din, &dq), GLN_STATUS_NOT_SUPPORTED, needle);
    CHECK_OK(gln_synchronize(g_cu));
    CHECK_OK(gln_context_async_error(g_cu));
    qout_free(&o);
    gln_twin_free(g_cu, &x);
    free(h);
}

static void test_tensor4_variants(void) {
    CHECK(setenv("GLN_CUDA_QUANT_TMA", "2", 1) == 0);
    tensor4_refusal(GLN_DTYPE_FP32, 64, 256, 0, "GLN_CUDA_QUANT_TMA=2 requires gq_tensor4_kernel");
    tensor4_refusal(GLN_DTYPE_FP32, 64, 256, 0, "the input is not bf16 or fp16");
    tensor4_refusal(GLN_DTYPE_BF16, 64, 36, 0, "cols is not a multiple of 8");
    tensor4_refusal(GLN_DTYPE_FP16, 64, 256, 2, "x is not 16-byte aligned");
    static const char *const tcs[] = {"128", "64"};
    for (size_t k = 0; k < COUNT(tcs); k++) {
        CHECK(setenv("GLN_CUDA_QUANT_TC", tcs[k], 1) == 0);
        tensor4_cases();
        test_tma_shapes();
        test_graph(); /* bf16, 320 columns: a last 128-column tile of one box */
        CHECK(unsetenv("GLN_CUDA_QUANT_TC") == 0);
    }
    static const char *const blocks[] = {"1", "3"};
    for (size_t b = 0; b < COUNT(blocks); b++) {
        CHECK(setenv("GLN_CUDA_QUANT_TMA_BLOCKS", blocks[b], 1) == 0);
        for (size_t k = 0; k < COUNT(tcs); k++) {
            CHECK(setenv("GLN_CUDA_QUANT_TC", tcs[k], 1) == 0);
            tensor4_cases();
            test_many_members(); /* 128 members, 256 columns: many member switches per block */
            CHECK(unsetenv("GLN_CUDA_QUANT_TC") == 0);
        }
        test_graph(); /* the default tiling */
        CHECK(unsetenv("GLN_CUDA_QUANT_TMA_BLOCKS") == 0);
    }
    /* the scale step as its own kernel after the v4 amax pass (by default its last block runs it) */
    CHECK(setenv("GLN_CUDA_QUANT_FUSED_SCALE", "0", 1) == 0);
    tensor4_cases();
    test_graph();
    CHECK(unsetenv("GLN_CUDA_QUANT_FUSED_SCALE") == 0);
    /* the group plan computed by its own kernel before the setup kernel (by default the setup
     * kernel computes it) */
    CHECK(setenv("GLN_CUDA_PLAN_DEFER", "0", 1) == 0);
    tensor4_cases();
    test_bad_splits();
    CHECK(unsetenv("GLN_CUDA_PLAN_DEFER") == 0);
    CHECK(unsetenv("GLN_CUDA_QUANT_TMA") == 0);
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu,
    GLN_CASE(test_encode_sweep), GLN_CASE(test_single), GLN_CASE(test_grouped), GLN_CASE(test_grouped_dtypes),
    GLN_CASE(test_many_members), GLN_CASE(test_graph), GLN_CASE(test_bad_splits),
    GLN_CASE(test_kernel_variants), GLN_CASE(test_mx3_sweep), GLN_CASE(test_mx3_single), GLN_CASE(test_mx3_grouped),
    GLN_CASE(test_mx3_swizzled), GLN_CASE(test_mx3_variants), GLN_CASE(test_tensor4_variants))
