/* The CUDA FP8 block-scaling quantizer (cuda_block.cu: BLOCK_1D 1x128 / 128x1 blocks, BLOCK_2D
 * 128x128 tiles) against the CPU reference, bit for bit: every data byte, every scale (padding
 * included) and every byte the quantizer must leave alone.
 *
 *   - the kernels' fast conversions (hardware FP32 -> E4M3 / E5M2 and fp16 -> FP32) against
 *     numerics.h over every input (gln_cuda_block_selfcheck);
 *   - one tensor through gln_quantize: shapes 1x1, 3x33, 129x31, 130x257 and vector-friendly
 *     ones, fp32 / bf16 / fp16 inputs, rowwise / columnwise / both, power-of-two and FP32
 *     scales, amax_epsilon, both NaN rules, E4M3 / E5M2, NaN / Inf / tiny / huge values, and
 *     misaligned buffers (the scalar load / store paths);
 *   - grouped tensors through gln_cuda_grouped_quantize_block (one launch, the device group
 *     plan) with host and device splits: members of 0 / 1 / 5 / 17 / 129 / 300 rows, one member
 *     holding every row, 16-row multiples (the 16-byte transposed stores), 4-row multiples,
 *     trailing packed rows that must stay untouched; and once through gln_grouped_quantize;
 *   - a CUDA graph capturing the plan + the grouped quantize with device splits on a caller's
 *     stream, replayed with other splits;
 *   - bf16 sweeps for the TMA kernel (bf16, 16-byte aligned, cols % 8 == 0): shapes 1x8,
 *     3x40, 129x24, 130x264, 128x128, 300x136, 257x1032, members of 0 / 1 / 127 / 128 / 129 /
 *     300 rows with 24 / 136 / 264 / 512 columns, every option, host and device splits, and the
 *     grid capped at 1-4 blocks (GLN_CUDA_QUANT_GRID) so each block wraps its stage ring many
 *     times, at every phase offset;
 *   - the dispatch: every case checks which kernel ran (gln_cuda_block_quant_last_kernel) against
 *     what its inputs call for — the TMA kernel for bf16 with a 16-byte aligned base and columns
 *     a multiple of 8, the general kernel for fp32, fp16, columns not a multiple of 8 or a
 *     misaligned bf16 base — and test_dispatch forces the general kernel through each of those
 *     inputs on shapes the TMA kernel would take, the grid capped too.
 * Outputs are poisoned (0xA5 data, NaN scales) on both backends and followed by guard bytes on
 * the device; a mismatch names the buffer, member, row, column, got and want.
 *
 * Skips (exit 77) without a CUDA device. */
#define _DEFAULT_SOURCE /* setenv (GLN_CUDA_QUANT_GRID) */
#include <stdlib.h>
#include <string.h>

#include "device_twin.h" /* every buffer: a host (CPU) and a device (CUDA) twin, poisoned alike */
#include "harness.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block.h"
#include "tensor/scale_layout.h"
#include "tensor/tensor.h"

static gln_context_t *g_cu, *g_cpu;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define DATA_POISON 0xA5u
#define SCALE_POISON 0xFFu /* NaN floats */
#define MAXM 16

/* ---- inputs ---------------------------------------------------------------------------------- */

static void store_bits(void *h, gln_dtype_t dt, size_t i, uint32_t f32, uint16_t half) {
    if (dt == GLN_DTYPE_FP32) memcpy((char *)h + 4 * i, &f32, 4);
    else if (dt == GLN_DTYPE_BF16) {
        uint16_t b = (uint16_t)(f32 >> 16);
        memcpy((char *)h + 2 * i, &b, 2);
    } else {
        memcpy((char *)h + 2 * i, &half, 2);
    }
}

/* [rows, cols] of dtype: N(0, 1) times a per-row power of two (so blocks get different scales),
 * some rows zero, some rows tiny (fp8_max / amax overflows to Inf: the value_for_inf rule); with
 * specials, scattered ±NaN (with payloads), ±Inf, -0, values near the dtype's max, subnormals. */
static void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials) {
    const size_t n = (size_t)rows * (size_t)cols;
    void *h = calloc(n ? n : 1, gln_dtype_size(dt));
    const double tiny = dt == GLN_DTYPE_FP16 ? 3e-8 : 1e-39, big = dt == GLN_DTYPE_FP16 ? 60000.0 : 1e38;
    for (int64_t r = 0; r < rows; r++) {
        const int kind = (int)gln_rng_int(rng, 0, 15);
        const double mag = kind == 0 ? 0.0 : kind == 1 ? tiny : ldexp(1.0, (int)gln_rng_int(rng, -8, 8));
        for (int64_t c = 0; c < cols; c++) gln_store(h, dt, (size_t)(r * cols + c), mag * gln_rng_normal(rng));
    }
    if (!specials || n == 0) return h;
    for (size_t k = 0; k < n / 50 + 4; k++) {
        const size_t i = (size_t)gln_rng_int(rng, 0, (int64_t)n - 1);
        switch (gln_rng_int(rng, 0, 7)) {
        case 0: store_bits(h, dt, i, 0x7FC12345u, 0x7E45u); break; /* +NaN, payload */
        case 1: store_bits(h, dt, i, 0xFFA00000u, 0xFD01u); break; /* -NaN (signalling payload) */
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

enum { BUF_DATA, BUF_COL_DATA, BUF_SCALE, BUF_COL_SCALE };
static const char *k_buf_name[] = {"data", "col_data", "scale_inv", "col_scale_inv"};

/* "member i row r col c" of element (or scale) index e of buffer `buf`. */
static void describe(const layout_t *L, int buf, size_t e, char *out, size_t n) {
    int64_t r0 = 0, s0 = 0;
    for (int32_t i = 0; i < L->num; i++) {
        const int64_t m = L->splits[i];
        if (buf == BUF_DATA || buf == BUF_COL_DATA) {
            if ((int64_t)e < (r0 + m) * L->cols) {
                const int64_t loc = (int64_t)e - r0 * L->cols;
                if (buf == BUF_DATA)
                    snprintf(out, n, "member %d (rows %lld) row %lld col %lld", (int)i, (long long)m,
                             (long long)(loc / L->cols), (long long)(loc % L->cols));
                else /* transposed [cols, m] */
                    snprintf(out, n, "member %d (rows %lld) transposed: col %lld row %lld", (int)i, (long long)m,
                             (long long)(loc / m), (long long)(loc % m));
                return;
            }
        } else {
            const int cw = buf == BUF_COL_SCALE;
            int64_t gr, gc;
            gln_scale_grid(L->mode, m, L->cols, cw, &gr, &gc);
            if ((int64_t)e < s0 + gr * gc) {
                const int64_t loc = (int64_t)e - s0;
                snprintf(out, n, "member %d (rows %lld) %s scale grid [%lld x %lld] entry (%lld, %lld)", (int)i,
                         (long long)m, cw ? "columnwise" : "rowwise", (long long)gr, (long long)gc,
                         (long long)(loc / gc), (long long)(loc % gc));
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
static void twin_check(const gln_twin_t *t, const layout_t *L, int buf, const char *what) {
    const where_t w = {L, buf};
    gln_twin_check(g_cu, t, buf >= BUF_SCALE ? 4 : 1, what, k_buf_name[buf], describe_at, &w);
}

/* ---- one quantized output (four twins) ------------------------------------------------------ */

typedef struct qout {
    gln_twin_t q, qt, s, cs;
} qout_t;

static qout_t qout_new(const gln_quant_config_t *cfg, size_t nd, size_t ns, size_t ncs, size_t skew) {
    qout_t o;
    memset(&o, 0, sizeof o);
    if (cfg->rowwise) {
        o.q = gln_twin_new(g_cu, nd, DATA_POISON, skew);
        o.s = gln_twin_new(g_cu, ns * 4, SCALE_POISON, 0);
    }
    if (cfg->columnwise) {
        o.qt = gln_twin_new(g_cu, nd, DATA_POISON, skew);
        o.cs = gln_twin_new(g_cu, ncs * 4, SCALE_POISON, 0);
    }
    return o;
}

static gln_tensor_t qout_tensor(const gln_quant_config_t *cfg, qout_t *o, int64_t rows, int64_t cols, int dev) {
    gln_tensor_t t = {cfg->fp8_dtype, rows, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    t.data = dev ? o->q.d : o->q.h;
    t.scale_inv = dev ? o->s.d : o->s.h;
    t.col_data = dev ? o->qt.d : o->qt.h;
    t.col_scale_inv = dev ? o->cs.d : o->cs.h;
    return t;
}

static void qout_check(const qout_t *o, const layout_t *L, const char *what) {
    twin_check(&o->q, L, BUF_DATA, what);
    twin_check(&o->qt, L, BUF_COL_DATA, what);
    twin_check(&o->s, L, BUF_SCALE, what);
    twin_check(&o->cs, L, BUF_COL_SCALE, what);
}

static void qout_repoison(qout_t *o) {
    if (o->q.h) gln_twin_repoison(g_cu, &o->q, DATA_POISON), gln_twin_repoison(g_cu, &o->s, SCALE_POISON);
    if (o->qt.h) gln_twin_repoison(g_cu, &o->qt, DATA_POISON), gln_twin_repoison(g_cu, &o->cs, SCALE_POISON);
}

static void qout_free(qout_t *o) {
    if (o->q.h) gln_twin_free(g_cu, &o->q), gln_twin_free(g_cu, &o->s);
    if (o->qt.h) gln_twin_free(g_cu, &o->qt), gln_twin_free(g_cu, &o->cs);
}

static void cfg_name(const gln_quant_config_t *cfg, gln_dtype_t dt, char *out, size_t n) {
    snprintf(out, n, "%s %s->%s %s%s%s%s eps %g", gln_scaling_name(cfg->mode), gln_dtype_name(dt),
             gln_dtype_name(cfg->fp8_dtype), cfg->rowwise ? "R" : "", cfg->columnwise ? "C" : "",
             cfg->power_2_scale ? " pow2" : " fp32-scale", cfg->amax_nan_propagate ? " nan-propagate" : "",
             (double)cfg->amax_epsilon);
}

/* The config of variant v (0..7) of mode / copies (1 R, 2 C, 3 RC). */
static gln_quant_config_t make_cfg(gln_scaling_mode_t mode, int copies, int v) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = mode;
    cfg.rowwise = copies & 1;
    cfg.columnwise = (copies >> 1) & 1;
    cfg.power_2_scale = v & 1;
    cfg.amax_nan_propagate = (v >> 1) & 1;
    cfg.fp8_dtype = v & 4 ? GLN_DTYPE_FP8_E5M2 : GLN_DTYPE_FP8_E4M3;
    cfg.amax_epsilon = v == 5 ? 1e-3f : 0.0f;
    return cfg;
}

static const gln_dtype_t k_hp[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

/* ---- which kernel ------------------------------------------------------------------------------ */

#define K_TMA "gln_block_quant_tma_kernel"
#define K_GENERAL "gln_block_quant_kernel"

/* The kernel the dispatch must pick for a packed input of dt [rows, cols] whose device base is
 * `skew` bytes past an aligned allocation; NULL: none runs (an empty tensor). */
static const char *want_kernel(gln_dtype_t dt, int64_t rows, int64_t cols, size_t skew) {
    if (rows == 0 || cols == 0) return NULL;
    return dt == GLN_DTYPE_BF16 && cols % 8 == 0 && skew % 16 == 0 ? K_TMA : K_GENERAL;
}

/* The kernel the last device quantize launched is `want` (the probe is cleared by reading it). */
static void check_kernel(const char *want, const char *what) {
    const char *got = gln_cuda_block_quant_last_kernel();
    const int ok = want ? got && strcmp(got, want) == 0 : got == NULL;
    CHECK_MSG(ok, "%s: ran %s, want %s", what, got ? got : "no kernel", want ? want : "no kernel");
}

static void set_grid_cap(const char *cap) {
    if (cap) CHECK(setenv("GLN_CUDA_QUANT_GRID", cap, 1) == 0);
    else CHECK(unsetenv("GLN_CUDA_QUANT_GRID") == 0);
}

/* ---- the fast conversions -------------------------------------------------------------------- */

static void test_selfcheck(void) {
    unsigned long long counts[3] = {1, 1, 1};
    unsigned int first[3] = {0, 0, 0};
    CHECK_OK(gln_cuda_block_selfcheck(g_cu, counts, first, "test_selfcheck"));
    static const char *what[3] = {"FP32 -> E4M3 (all 2^32 inputs)", "FP32 -> E5M2 (all 2^32 inputs)",
                                  "fp16 -> FP32 (all 2^16 inputs)"};
    for (int k = 0; k < 3; k++)
        CHECK_MSG(counts[k] == 0, "block kernels' %s: %llu inputs differ from numerics.h; first 0x%08x", what[k],
                  counts[k], first[k]);
}

/* ---- one tensor ------------------------------------------------------------------------------ */

/* gln_quantize on both backends; skew_in / skew_out misalign the device input / outputs. */
static void single_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int64_t rows, int64_t cols, int specials,
                        size_t skew_in, size_t skew_out, gln_rng_t *rng) {
    gln_quant_layout_t lay;
    CHECK_OK(gln_quant_layout(cfg->mode, cfg->fp8_dtype, rows, cols, &lay));
    void *h = make_input(rng, dt, rows, cols, specials);
    const size_t nx = (size_t)rows * (size_t)cols * gln_dtype_size(dt);
    gln_twin_t x = gln_twin_input(g_cu, h, nx, skew_in);
    qout_t o = qout_new(cfg, lay.data_bytes, lay.scale_bytes / 4, lay.col_scale_bytes / 4, skew_out);
    gln_tensor_t hin = gln_tensor_make(dt, rows, cols, x.h), din = gln_tensor_make(dt, rows, cols, x.d);
    gln_tensor_t hq = qout_tensor(cfg, &o, rows, cols, 0), dq = qout_tensor(cfg, &o, rows, cols, 1);
    CHECK_OK(gln_quantize(g_cpu, cfg, &hin, &hq));
    (void)gln_cuda_block_quant_last_kernel();
    CHECK_OK(gln_quantize(g_cu, cfg, &din, &dq));
    char what[240], c[120];
    cfg_name(cfg, dt, c, sizeof c);
    snprintf(what, sizeof what, "quantize %lldx%lld %s%s%s%s", (long long)rows, (long long)cols, c,
             specials ? " specials" : "", skew_in ? " misaligned-in" : "", skew_out ? " misaligned-out" : "");
    check_kernel(want_kernel(dt, rows, cols, skew_in), what);
    layout_t L = {cfg->mode, 1, {rows}, cols};
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &x);
    free(h);
}

/* bf16 shapes that the TMA kernel takes, every mode / copy / option; then a tensor of 54
 * tiles with the grid capped at 1-4 blocks (each block walks 14-54 tiles through its ring). */
static void tma_single_sweep(gln_rng_t *rng) {
    static const int64_t shapes[][2] = {{1, 8},     {3, 40},    {129, 24}, {130, 264},
                                        {128, 128}, {300, 136}, {257, 1032}};
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int mode = 0; mode < 2; mode++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg =
                        make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies, v);
                    single_case(&cfg, GLN_DTYPE_BF16, shapes[s][0], shapes[s][1], v >= 2 || (s & 1), 0, 0, rng);
                }
    static const char *caps[] = {"1", "2", "3", "4"};
    for (size_t c = 0; c < COUNT(caps); c++) {
        set_grid_cap(caps[c]);
        for (int mode = 0; mode < 2; mode++)
            for (int copies = 1; copies <= 3; copies++) {
                const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies,
                                                        (int)(c + (size_t)copies) % 8);
                single_case(&cfg, GLN_DTYPE_BF16, 700, 1032, 1, 0, 0, rng);
            }
        set_grid_cap(NULL);
    }
}

static void test_single(void) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 33}, {129, 31}, {130, 257}, {128, 128}, {256, 384}, {77, 136}};
    gln_rng_t rng = gln_rng_seed(91);
    for (size_t s = 0; s < COUNT(shapes); s++)
        for (int mode = 0; mode < 2; mode++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg =
                        make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies, v);
                    const gln_dtype_t dt = k_hp[(s + (size_t)copies + (size_t)v) % COUNT(k_hp)];
                    single_case(&cfg, dt, shapes[s][0], shapes[s][1], v >= 2, 0, 0, &rng);
                }
    /* every input dtype on one shape, and misaligned buffers (scalar loads / stores) */
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (int mode = 0; mode < 2; mode++) {
            const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, 3);
            single_case(&cfg, k_hp[d], 200, 512, 1, 0, 0, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, gln_dtype_size(k_hp[d]), 0, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, 0, 1, &rng);
            single_case(&cfg, k_hp[d], 200, 512, 1, 0, 4, &rng);
        }
    tma_single_sweep(&rng);
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
    char c[120], sp[160] = "";
    cfg_name(g->cfg, g->dt, c, sizeof c);
    for (int32_t i = 0; i < g->num && strlen(sp) < sizeof sp - 24; i++)
        snprintf(sp + strlen(sp), sizeof sp - strlen(sp), "%s%lld", i ? "," : "", (long long)g->splits[i]);
    snprintf(out, n, "grouped %s splits {%s} rows %lld cols %lld %s", c, sp, (long long)g->rows, (long long)g->cols, how);
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

/* The CUDA grouped quantize: via = 0 the block entry point with a plan, 1 gln_grouped_quantize. */
static void grouped_dev(const gcase_t *g, const int64_t *splits, int dev_splits, gln_twin_t *x, qout_t *o, int via) {
    (void)gln_cuda_block_quant_last_kernel();
    gln_grouped_tensor_t din = {g->num, splits, dev_splits, gln_tensor_make(g->dt, g->rows, g->cols, x->d)};
    gln_grouped_tensor_t dout = {g->num, splits, dev_splits, qout_tensor(g->cfg, o, g->rows, g->cols, 1)};
    if (via) {
        CHECK_OK(gln_grouped_quantize(g_cu, g->cfg, &din, &dout));
        return;
    }
    gln_cuda_plan_t plan;
    CHECK_OK(gln_cuda_plan_make(g_cu, &din, g->cfg->mode, &plan, "test grouped block"));
    CHECK_OK(gln_cuda_grouped_quantize_block(g_cu, g->cfg, &din, &dout, &plan, "test grouped block"));
    gln_cuda_plan_free(g_cu, &plan);
}

static void grouped_case(const gcase_t *g, int dev_splits, int via, int specials, gln_rng_t *rng) {
    const size_t nd = (size_t)g->rows * (size_t)g->cols;
    void *h = make_input(rng, g->dt, g->rows, g->cols, specials);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(g->dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, g->splits, (size_t)g->num * sizeof(int64_t), 0);
    size_t ns, ncs;
    scale_bounds(g, &ns, &ncs);
    qout_t o = qout_new(g->cfg, nd, ns, ncs, 0);
    grouped_ref(g, &x, &o);
    grouped_dev(g, dev_splits ? (const int64_t *)sp.d : g->splits, dev_splits, &x, &o, via);
    CHECK_OK(gln_context_async_error(g_cu));
    char what[400];
    gcase_name(g, via ? "gln_grouped_quantize" : dev_splits ? "(device splits)" : "(host splits)", what, sizeof what);
    check_kernel(want_kernel(g->dt, g->rows, g->cols, 0), what);
    layout_t L = {g->cfg->mode, g->num, {0}, g->cols};
    memcpy(L.splits, g->splits, (size_t)g->num * sizeof(int64_t));
    qout_check(&o, &L, what);
    qout_free(&o);
    gln_twin_free(g_cu, &sp);
    gln_twin_free(g_cu, &x);
    free(h);
}

static const int64_t k_sp_awkward[] = {0, 1, 5, 17, 129, 300};
static const int64_t k_sp_one[] = {0, 452, 0};
static const int64_t k_sp_16[] = {16, 32, 0, 256, 128, 48};
static const int64_t k_sp_4[] = {20, 132, 4, 0, 8};
static const int64_t k_sp_single[] = {7};

typedef struct splits_set {
    int32_t num;
    const int64_t *splits;
} splits_set_t;
static const splits_set_t k_sets[] = {{6, k_sp_awkward}, {3, k_sp_one}, {6, k_sp_16}, {5, k_sp_4}, {1, k_sp_single}};

/* bf16 groups that the TMA kernel takes: members of 0 / 1 / 127 / 128 / 129 / 300 rows (tiles
 * that end inside a member, at its end, and boxes that reach into the next member's rows or past
 * the packed rows), every option, host and device splits; then with the grid capped. */
static const int64_t k_sp_tma[] = {0, 1, 127, 128, 129, 300};

static void tma_grouped_sweep(gln_rng_t *rng) {
    static const int64_t cols[] = {24, 136, 264, 512};
    const int64_t sum = splits_sum(6, k_sp_tma);
    for (size_t c = 0; c < COUNT(cols); c++)
        for (int mode = 0; mode < 2; mode++)
            for (int copies = 1; copies <= 3; copies++)
                for (int v = 0; v < 8; v++) {
                    const gln_quant_config_t cfg =
                        make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies, v);
                    gcase_t g = {&cfg, GLN_DTYPE_BF16, 6, k_sp_tma, sum + (v & 1) * 3, cols[c]};
                    grouped_case(&g, (v + copies + (int)c) & 1, 0, v >= 2, rng);
                }
    static const char *caps[] = {"1", "3"};
    for (size_t k = 0; k < COUNT(caps); k++) {
        set_grid_cap(caps[k]);
        for (int mode = 0; mode < 2; mode++)
            for (int dev = 0; dev < 2; dev++) {
                const gln_quant_config_t cfg =
                    make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, 2 + (int)k + 4 * dev);
                gcase_t g = {&cfg, GLN_DTYPE_BF16, 6, k_sp_tma, sum + 5, 264};
                grouped_case(&g, dev, 0, 1, rng);
            }
        set_grid_cap(NULL);
    }
}

static void test_grouped(void) {
    static const int64_t cols[] = {33, 128, 257, 512};
    gln_rng_t rng = gln_rng_seed(92);
    for (size_t s = 0; s < COUNT(k_sets); s++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int mode = 0; mode < 2; mode++)
                for (int copies = 1; copies <= 3; copies++)
                    for (int v = 0; v < 8; v += 1 + (int)((s + c) % 2)) {
                        const gln_quant_config_t cfg =
                            make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies, v);
                        const int64_t sum = splits_sum(k_sets[s].num, k_sets[s].splits);
                        gcase_t g = {&cfg, k_hp[(s + c + (size_t)v) % COUNT(k_hp)], k_sets[s].num, k_sets[s].splits,
                                     sum + (v & 1) * 3, cols[c]};
                        grouped_case(&g, (v + copies) & 1, 0, v >= 2, &rng);
                    }
    tma_grouped_sweep(&rng);
}

/* Every input dtype with both split kinds on the awkward splits, and the public entry point. */
static void test_grouped_dtypes(void) {
    gln_rng_t rng = gln_rng_seed(93);
    for (size_t d = 0; d < COUNT(k_hp); d++)
        for (int mode = 0; mode < 2; mode++)
            for (int dev = 0; dev < 2; dev++) {
                const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, 2);
                gcase_t g = {&cfg, k_hp[d], 6, k_sp_awkward, 460, 384};
                grouped_case(&g, dev, 0, 1, &rng);
                grouped_case(&g, dev, 1, 1, &rng);
            }
}

/* ---- CUDA graph --------------------------------------------------------------------------------- */

/* Capture plan + quantize with device splits once; replay with other splits of the same rows. */
static void graph_case(const gln_quant_config_t *cfg, gln_dtype_t dt, gln_rng_t *rng) {
    enum { N = 4 };
    static const int64_t sets[][N] = {{100, 0, 37, 263}, {0, 0, 400, 0}, {1, 128, 16, 255}, {0, 0, 0, 0}};
    const int64_t rows = 400, cols = 320;
    const size_t nd = (size_t)rows * (size_t)cols;
    void *h = make_input(rng, dt, rows, cols, 1);
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(dt), 0);
    gln_twin_t sp = gln_twin_input(g_cu, sets[0], sizeof sets[0], 0);
    gcase_t g = {cfg, dt, N, sets[0], rows, cols};
    size_t ns, ncs;
    scale_bounds(&g, &ns, &ncs);
    qout_t o = qout_new(cfg, nd, ns, ncs, 0);
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    CHECK_OK(gln_context_set_stream(g_cu, stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    grouped_dev(&g, (const int64_t *)sp.d, 1, &x, &o, 0);
    check_kernel(want_kernel(dt, rows, cols, 0), "CUDA graph capture");
    CHECK(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (size_t k = 0; k < COUNT(sets) && exec; k++) {
        g.splits = sets[k];
        gln_twin_set(g_cu, &sp, sets[k]);
        qout_repoison(&o);
        grouped_ref(&g, &x, &o);
        CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess);
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
        char what[400];
        gcase_name(&g, "(CUDA graph replay, device splits)", what, sizeof what);
        layout_t L = {cfg->mode, N, {0}, cols};
        memcpy(L.splits, sets[k], sizeof sets[k]);
        qout_check(&o, &L, what);
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_set_stream(g_cu, NULL));
    if (stream) cudaStreamDestroy(stream);
    qout_free(&o);
    gln_twin_free(g_cu, &sp);
    gln_twin_free(g_cu, &x);
    free(h);
}

static void test_graph(void) {
    gln_rng_t rng = gln_rng_seed(94);
    for (int mode = 0; mode < 2; mode++) {
        const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, mode ? 1 : 2);
        graph_case(&cfg, mode ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32, &rng);
    }
    /* bf16 BLOCK_1D too (cols 320: the TMA kernel, its tensor map captured in the graph) */
    const gln_quant_config_t cfg = make_cfg(GLN_SCALING_BLOCK_1D, 3, 6);
    graph_case(&cfg, GLN_DTYPE_BF16, &rng);
}

/* The TMA kernel on the awkward shapes it takes (the dispatch check of every case proves it ran):
 * columns 8 / 24 / 136 / 264 (a partial last column tile, tiles narrower than one 16-byte chunk
 * per thread), rows 1 / 3 / 129 / 130 (partial row tiles, boxes past the tensor's end), members
 * of 0 / 1 / 127 / 129 / 300 rows (boxes reaching into the next member), NaN / Inf, E4M3 / E5M2,
 * power-of-two and FP32 scales, both NaN rules, BLOCK_1D and BLOCK_2D, all against the CPU
 * reference; then with the grid capped at 1 and 3 blocks so each block turns its stage ring many
 * times. */
static void test_tma_shapes(void) {
    static const int64_t rows[] = {1, 3, 129, 130}, cols[] = {8, 24, 136, 264};
    static const int64_t sp[] = {0, 1, 127, 129, 300};
    gln_rng_t rng = gln_rng_seed(95);
    for (size_t r = 0; r < COUNT(rows); r++)
        for (size_t c = 0; c < COUNT(cols); c++)
            for (int mode = 0; mode < 2; mode++)
                for (int v = 0; v < 8; v++) {
                    const int copies = 1 + (int)((r + c + (size_t)v) % 3);
                    const gln_quant_config_t cfg =
                        make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, copies, v);
                    single_case(&cfg, GLN_DTYPE_BF16, rows[r], cols[c], 1, 0, 0, &rng);
                }
    const int64_t sum = splits_sum((int32_t)COUNT(sp), sp);
    for (size_t c = 0; c < COUNT(cols); c++)
        for (int mode = 0; mode < 2; mode++)
            for (int v = 0; v < 8; v++) {
                const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, v);
                gcase_t g = {&cfg, GLN_DTYPE_BF16, (int32_t)COUNT(sp), sp, sum + (v & 1) * 3, cols[c]};
                grouped_case(&g, (v + (int)c) & 1, 0, 1, &rng);
            }
    static const char *caps[] = {"1", "3"};
    for (size_t k = 0; k < COUNT(caps); k++) {
        set_grid_cap(caps[k]);
        for (int mode = 0; mode < 2; mode++)
            for (int v = 0; v < 8; v += 3) {
                const gln_quant_config_t cfg = make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 3, v);
                single_case(&cfg, GLN_DTYPE_BF16, 700, 264, 1, 0, 0, &rng);
                single_case(&cfg, GLN_DTYPE_BF16, 130, 8, 1, 0, 0, &rng);
                gcase_t g = {&cfg, GLN_DTYPE_BF16, (int32_t)COUNT(sp), sp, sum + 5, 136};
                grouped_case(&g, (v + (int)k) & 1, 0, 1, &rng);
            }
        set_grid_cap(NULL);
    }
}

/* The general kernel forced through the inputs the TMA kernel cannot take, on shapes it otherwise
 * would (129 x 136, 700 x 264, the grouped members above): fp32 and fp16 input, bf16 with 33 / 132
 * columns (not a multiple of 8; 132 is a multiple of 4, so 8-byte aligned rows still), bf16 whose
 * base is 2 or 8 bytes past a 16-byte boundary; every option, both modes, against the CPU
 * reference, and again with the grid capped at 1 and 3 blocks (each block walks many tiles). */
static void test_dispatch(void) {
    gln_rng_t rng = gln_rng_seed(96);
    static const int64_t sp[] = {0, 1, 127, 129, 300};
    const int64_t sum = splits_sum((int32_t)COUNT(sp), sp);
    static const char *caps[] = {NULL, "1", "3"};
    for (size_t k = 0; k < COUNT(caps); k++) {
        set_grid_cap(caps[k]);
        for (int mode = 0; mode < 2; mode++)
            for (int v = 0; v < 8; v += 1 + (int)k) {
                const gln_quant_config_t cfg =
                    make_cfg(mode ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D, 1 + v % 3, v);
                const int64_t rows = k ? 700 : 129, cols = k ? 264 : 136;
                single_case(&cfg, GLN_DTYPE_BF16, rows, cols, 1, 0, 0, &rng); /* the TMA kernel */
                single_case(&cfg, GLN_DTYPE_FP32, rows, cols, 1, 0, 0, &rng);
                single_case(&cfg, GLN_DTYPE_FP16, rows, cols, 1, 0, 0, &rng);
                single_case(&cfg, GLN_DTYPE_BF16, rows, 33, 1, 0, 0, &rng);
                single_case(&cfg, GLN_DTYPE_BF16, rows, 132, 1, 0, 0, &rng);
                single_case(&cfg, GLN_DTYPE_BF16, rows, cols, 1, 2, 0, &rng);
                single_case(&cfg, GLN_DTYPE_BF16, rows, cols, 1, 8, 1, &rng);
                const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_FP16, GLN_DTYPE_BF16};
                for (size_t d = 0; d < COUNT(dts); d++) {
                    gcase_t g = {&cfg, dts[d], (int32_t)COUNT(sp), sp, sum + (v & 1) * 3,
                                 dts[d] == GLN_DTYPE_BF16 ? 33 : 136};
                    grouped_case(&g, (v + (int)d) & 1, 0, 1, &rng);
                }
            }
        set_grid_cap(NULL);
    }
}

#endif

GLN_TEST_CUDA_ONLY_MAIN(g_cpu, g_cu,
    GLN_CASE(test_selfcheck), GLN_CASE(test_single), GLN_CASE(test_grouped), GLN_CASE(test_grouped_dtypes),
    GLN_CASE(test_graph), GLN_CASE(test_tma_shapes), GLN_CASE(test_dispatch))
