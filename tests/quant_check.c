/* Helpers shared by the CUDA quantizer tests (test_cuda_grouped_quant.c, test_cuda_quant_mxfp8.c):
 * inputs with special values, outputs poisoned on both backends, and the comparison of every byte
 * with the CPU reference, a mismatch named by buffer, member, row and column. */
#include "quant_check.h"

#ifdef GLN_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/scale_layout.h"
#include "tensor/tensor.h"

gln_context_t *g_cu, *g_cpu;
int g_misalign_input;

const gln_dtype_t k_hp[3] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

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
void *make_input(gln_rng_t *rng, gln_dtype_t dt, int64_t rows, int64_t cols, int specials, int neg_nan) {
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


static const char *const k_buf_name[] = {"data", "col_data", "scale_inv", "col_scale_inv", "amax", "scale"};

void layout_set(layout_t *L, gln_scaling_mode_t mode, int32_t num, const int64_t *splits, int64_t cols) {
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
void twin_check(const gln_twin_t *t, const layout_t *L, int buf, size_t es, const char *what) {
    const where_t w = {L, buf};
    gln_twin_check(g_cu, t, es, what, k_buf_name[buf], describe_at, &w);
}

/* ---- one quantized output: data, scales, and TENSOR's amax / scale arrays --------------------- */


/* TENSOR: amax0 / scale0 (num each) are the initial amax / scale values, or NULL for no buffer
 * (current scaling then uses its own scratch). */
qout_t qout_new(const gln_quant_config_t *cfg, size_t nd, size_t ns, size_t ncs, int32_t num,
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

gln_tensor_t qout_tensor(const gln_quant_config_t *cfg, qout_t *o, int64_t rows, int64_t cols, int dev) {
    gln_tensor_t t = {cfg->fp8_dtype, rows, cols, NULL, cfg->mode, NULL, NULL, NULL, NULL, NULL};
    t.data = dev ? o->q.d : o->q.h;
    t.scale_inv = dev ? o->s.d : o->s.h;
    t.col_data = dev ? o->qt.d : o->qt.h;
    t.col_scale_inv = dev ? o->cs.d : o->cs.h;
    t.amax = (float *)(dev ? o->amax.d : o->amax.h);
    t.scale = (float *)(dev ? o->scale.d : o->scale.h);
    return t;
}

void qout_check(const qout_t *o, const layout_t *L, const char *what) {
    twin_check(&o->q, L, BUF_DATA, 1, what);
    twin_check(&o->qt, L, BUF_COL_DATA, 1, what);
    twin_check(&o->s, L, BUF_SCALE, o->es, what);
    twin_check(&o->cs, L, BUF_COL_SCALE, o->es, what);
    twin_check(&o->amax, L, BUF_AMAX, 4, what);
    twin_check(&o->scale, L, BUF_ENC_SCALE, 4, what);
}

void qout_free(qout_t *o) {
    gln_twin_free(g_cu, &o->q), gln_twin_free(g_cu, &o->s);
    gln_twin_free(g_cu, &o->qt), gln_twin_free(g_cu, &o->cs);
    gln_twin_free(g_cu, &o->amax), gln_twin_free(g_cu, &o->scale);
}

/* ---- configurations ------------------------------------------------------------------------- */


/* Mode kind m, copies (1 R, 2 C, 3 RC), variant v (0..7): E4M3 / E5M2, NaN rule, and for current
 * scaling power-of-two scales and an amax epsilon. */
gln_quant_config_t make_cfg(int m, int copies, int v) {
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

void cfg_name(const gln_quant_config_t *cfg, gln_dtype_t dt, char *out, size_t n) {
    snprintf(out, n, "%s%s %s->%s %s%s%s%s eps %g", gln_scaling_name(cfg->mode),
             cfg->mode == GLN_SCALING_TENSOR ? (cfg->delayed ? " delayed" : " current")
                                              : (cfg->e8m0_rounding == GLN_E8M0_ROUND_FLOOR ? " floor" : " round-up"),
             gln_dtype_name(dt), gln_dtype_name(cfg->fp8_dtype), cfg->rowwise ? "R" : "", cfg->columnwise ? "C" : "",
             cfg->power_2_scale ? " pow2" : "", cfg->amax_nan_propagate ? " nan-propagate" : "",
             (double)cfg->amax_epsilon);
}

/* A negative NaN may meet a NaN MXFP8 decode multiplier (code 0xFF, nan_propagate only); which
 * NaN the host's x86 multiply returns there depends on its compiler's operand order. */
int neg_nan_ok(const gln_quant_config_t *cfg) {
    return !(cfg->mode == GLN_SCALING_MXFP8_1D && cfg->amax_nan_propagate);
}

/* Initial per-member amax / scale for TENSOR: delayed gets awkward scales (not powers of two) and
 * prior amaxes to max with; current alternates the caller's buffers with none. */
void tensor_state(const gln_quant_config_t *cfg, int32_t num, int with_buffers, float *amax0, float *scale0,
                         const float **pa, const float **ps) {
    *pa = *ps = NULL;
    if (cfg->mode != GLN_SCALING_TENSOR) return;
    for (int32_t i = 0; i < num; i++) {
        amax0[i] = 0.37f * (float)(i % 7);
        scale0[i] = i % 5 == 3 ? 0.0078125f : 20.0f + 7.3f * (float)(i % 11);
    }
    if (cfg->delayed || with_buffers) *pa = amax0, *ps = scale0;
}


/* ---- one tensor ------------------------------------------------------------------------------ */

/* gln_quantize on both backends; skew_in / skew_out misalign the device input / outputs. */
void single_case(const gln_quant_config_t *cfg, gln_dtype_t dt, int64_t rows, int64_t cols, int specials,
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

/* ---- grouped ------------------------------------------------------------------------------------ */


int64_t splits_sum(int32_t num, const int64_t *splits) {
    int64_t s = 0;
    for (int32_t i = 0; i < num; i++) s += splits[i];
    return s;
}

void gcase_name(const gcase_t *g, const char *how, char *out, size_t n) {
    char c[160], sp[200] = "";
    cfg_name(g->cfg, g->dt, c, sizeof c);
    for (int32_t i = 0; i < g->num && strlen(sp) < sizeof sp - 24; i++)
        snprintf(sp + strlen(sp), sizeof sp - strlen(sp), "%s%lld", i ? "," : "", (long long)g->splits[i]);
    snprintf(out, n, "grouped %s splits {%s} (%d members) rows %lld cols %lld %s", c, sp, (int)g->num,
             (long long)g->rows, (long long)g->cols, how);
}

/* Scale buffers sized for any splits of these rows (as a graph-safe caller would). */
void scale_bounds(const gcase_t *g, size_t *ns, size_t *ncs) {
    int64_t r = 0, c = 0;
    CHECK_OK(gln_grouped_scale_bound(g->cfg->mode, g->num, g->rows, g->cols, &r, &c));
    *ns = (size_t)r, *ncs = (size_t)c;
}

/* The CPU's grouped quantize of x.h into o's host twins. */
void grouped_ref(const gcase_t *g, gln_twin_t *x, qout_t *o) {
    gln_grouped_tensor_t hin = {g->num, g->splits, 0, gln_tensor_make(g->dt, g->rows, g->cols, x->h)};
    gln_grouped_tensor_t hout = {g->num, g->splits, 0, qout_tensor(g->cfg, o, g->rows, g->cols, 0)};
    CHECK_OK(gln_grouped_quantize(g_cpu, g->cfg, &hin, &hout));
}

/* The CUDA grouped quantize; out_splits: out's own copy (NULL: in's). */
void grouped_dev(const gcase_t *g, const int64_t *splits, const int64_t *out_splits, int dev_splits,
                        gln_twin_t *x, qout_t *o) {
    gln_grouped_tensor_t din = {g->num, splits, dev_splits, gln_tensor_make(g->dt, g->rows, g->cols, x->d)};
    gln_grouped_tensor_t dout = {g->num, out_splits ? out_splits : splits, dev_splits,
                                 qout_tensor(g->cfg, o, g->rows, g->cols, 1)};
    CHECK_OK(gln_grouped_quantize(g_cu, g->cfg, &din, &dout));
}

/* how: 0 host splits, 1 device splits, 2 device splits with a separate copy for out. */
void grouped_case(const gcase_t *g, int how, int specials, int with_buffers, gln_rng_t *rng) {
    const size_t nd = (size_t)g->rows * (size_t)g->cols;
    void *h = make_input(rng, g->dt, g->rows, g->cols, specials, neg_nan_ok(g->cfg));
    const size_t skew = g_misalign_input ? gln_dtype_size(g->dt) : 0;
    gln_twin_t x = gln_twin_input(g_cu, h, nd * gln_dtype_size(g->dt), skew);
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
    if (skew) strncat(what, " (misaligned input)", sizeof what - strlen(what) - 1);
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

/* ---- CUDA graph --------------------------------------------------------------------------------- */

enum { GR_N = 5, GR_ROWS = 400, GR_COLS = 320 };
static const int64_t k_graph_sets[][GR_N] = {
    {100, 0, 37, 263, 0}, {0, 0, 400, 0, 0}, {1, 128, 16, 255, 0}, {0, 0, 0, 0, 0}, {5, 17, 129, 1, 200}};

/* TENSOR current, TENSOR delayed and MXFP8 grouped quantizes with device splits captured once on a
 * caller's stream; replayed with other splits; each replay equals the CPU. */
void test_graph(void) {
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

#else
typedef int quant_check_unused_t; /* the helpers need the CUDA runtime */
#endif
