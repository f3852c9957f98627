/* The CUDA backend's delayed-scaling state slots (fp8_state_gather / record / update) against
 * the CPU backend's, bit for bit, and their use inside a CUDA graph.
 *
 * Skips (exit 77) when CUDA is not compiled in or no device is present.  Otherwise:
 *   - update: random states (amax histories with 0, NaN, Inf, subnormal and huge entries) over
 *     slot counts 1..129, history lengths 1..16, margins 0..126, both algorithms, always_roll and
 *     nan_propagate, three steps in a row: scales and histories equal the CPU slot's bit for bit;
 *   - gather and record over strided selections, both NaN rules: equal bit for bit;
 *   - a graph: gather + per-member delayed quantize + record + update, captured once on a
 *     caller's stream (capture fails if anything synchronizes or uses another stream) and
 *     replayed with new data each time; after every replay the state and the quantized bytes
 *     equal the same sequence run eagerly on the CPU.
 * Device outputs are poisoned (0xFF: NaN) before each run and followed by guard bytes that must
 * survive. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/context.h"
#include "common/error.h"
#include "device_twin.h"
#include "harness.h"

#if defined(GLN_TEST_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

static gln_context_t *g_cpu, *g_cu;

/* ---- device buffers (guarded twins, device_twin.h) ---------------------------------------- */

/* The device bytes of a twin into host `dst`, checking its guard. */
static void fetch_into(const gln_twin_t *b, void *dst, const char *what) {
    void *h = gln_twin_fetch(g_cu, b, what);
    memcpy(dst, h, b->bytes);
    free(h);
}

/* ---- awkward values ---------------------------------------------------------------------------- */

static float awkward_amax(gln_rng_t *r) {
    switch (gln_rng_int(r, 0, 15)) {
    case 0: case 1: case 2: case 3: return 0.0f;
    case 4: return NAN;
    case 5: return INFINITY;
    case 6: return 1e-40f;
    case 7: return 3.0e38f;
    default: return ldexpf((float)gln_rng_uniform(r, 1.0, 2.0), (int)gln_rng_int(r, -60, 60));
    }
}

/* ---- update ------------------------------------------------------------------------------------ */

typedef struct upd_case {
    int32_t slots, len;
    int margin;
    gln_amax_algo_t algo;
    int always_roll, nan_propagate;
} upd_case_t;

static void compare_state(const upd_case_t *c, int step, const float *scale_cu, const float *scale_cpu,
                          const float *hist_cu, const float *hist_cpu) {
    char what[200];
    snprintf(what, sizeof what, "step %d (slots %d, len %d, margin %d, algo %d, always_roll %d, nan_propagate %d)",
             step, c->slots, c->len, c->margin, (int)c->algo, c->always_roll, c->nan_propagate);
    char label[240];
    snprintf(label, sizeof label, "%s: scale cuda vs cpu", what);
    gln_check_bitwise(label, scale_cu, scale_cpu, (size_t)c->slots * 4);
    snprintf(label, sizeof label, "%s: history cuda vs cpu", what);
    gln_check_bitwise(label, hist_cu, hist_cpu, (size_t)c->slots * (size_t)c->len * 4);
}

static void update_case(const upd_case_t *c, gln_rng_t *r) {
    const size_t n = (size_t)c->slots, nh = n * (size_t)c->len;
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    o.always_roll = c->always_roll;
    o.amax_nan_propagate = c->nan_propagate;
    float *hist = malloc(nh * 4), *scale = malloc(n * 4), *fmax = malloc(n * 4);
    float *hist_cu = malloc(nh * 4), *scale_cu = malloc(n * 4);
    for (size_t i = 0; i < nh; i++) hist[i] = awkward_amax(r);
    for (size_t k = 0; k < n; k++) {
        scale[k] = ldexpf((float)gln_rng_uniform(r, 1.0, 2.0), (int)gln_rng_int(r, -20, 20));
        fmax[k] = gln_rng_int(r, 0, 1) ? 448.0f : 57344.0f;
    }
    gln_twin_t dh = gln_twin_upload(g_cu, hist, nh * 4), ds = gln_twin_upload(g_cu, scale, n * 4), df = gln_twin_upload(g_cu, fmax, n * 4);
    for (int step = 0; step < 3; step++) {
        CHECK_OK(g_cpu->ops->fp8_state_update(g_cpu, c->slots, c->len, hist, scale, fmax, c->margin, c->algo, &o));
        CHECK_OK(g_cu->ops->fp8_state_update(g_cu, c->slots, c->len, dh.d, ds.d, df.d, c->margin, c->algo, &o));
        fetch_into(&dh, hist_cu, "history"), fetch_into(&ds, scale_cu, "scale");
        compare_state(c, step, scale_cu, scale, hist_cu, hist);
        for (size_t k = 0; k < n; k++) hist[k] = awkward_amax(r); /* the next step's row 0 */
        CHECK_OK(gln_memcpy(g_cu, dh.d, hist, n * 4, GLN_COPY_HOST_TO_BACKEND));
    }
    float *fmax_cu = malloc(n * 4);
    fetch_into(&df, fmax_cu, "fp8_max");
    gln_check_bitwise("fp8_max unchanged", fmax_cu, fmax, n * 4);
    gln_twin_free(g_cu, &dh), gln_twin_free(g_cu, &ds), gln_twin_free(g_cu, &df);
    free(hist), free(scale), free(fmax), free(hist_cu), free(scale_cu), free(fmax_cu);
}

static void test_update(void) {
    static const int32_t slots[] = {1, 2, 5, 17, 129}, lens[] = {1, 2, 3, 16};
    static const int margins[] = {0, 1, 7, 126};
    gln_rng_t r = gln_rng_seed(91);
    for (size_t si = 0; si < 5; si++)
        for (size_t li = 0; li < 4; li++)
            for (size_t mi = 0; mi < 4; mi++)
                for (int flags = 0; flags < 8; flags++) {
                    upd_case_t c = {slots[si], lens[li], margins[mi],
                                    (flags & 1) ? GLN_AMAX_ALGO_MOST_RECENT : GLN_AMAX_ALGO_MAX, (flags >> 1) & 1,
                                    (flags >> 2) & 1};
                    update_case(&c, &r);
                }
}

/* Histories of TE's default length (1024) and around the update kernel's 256-row chunks, with
 * slot counts around its 32-slot blocks. */
static void test_update_long(void) {
    static const int32_t slots[] = {33, 384}, lens[] = {255, 256, 257, 1024};
    gln_rng_t r = gln_rng_seed(92);
    for (size_t si = 0; si < 2; si++)
        for (size_t li = 0; li < 4; li++)
            for (int flags = 0; flags < 8; flags++) {
                upd_case_t c = {slots[si], lens[li], (int)(li * 3),
                                (flags & 1) ? GLN_AMAX_ALGO_MOST_RECENT : GLN_AMAX_ALGO_MAX, (flags >> 1) & 1,
                                (flags >> 2) & 1};
                update_case(&c, &r);
            }
}

/* ---- gather and record ------------------------------------------------------------------------- */

typedef struct sel {
    int32_t first, stride, n;
} sel_t;
static const sel_t SELECTIONS[] = {{0, 1, 1}, {0, 1, 40}, {0, 3, 13}, {1, 3, 13}, {2, 3, 13}, {0, 2, 20}, {1, 2, 20}};
#define NSEL (sizeof SELECTIONS / sizeof SELECTIONS[0])
#define STATE_SLOTS 40

static void test_gather(void) {
    gln_rng_t r = gln_rng_seed(92);
    float state[STATE_SLOTS], scale[STATE_SLOTS], amax[STATE_SLOTS], scale_cu[STATE_SLOTS], amax_cu[STATE_SLOTS];
    for (int k = 0; k < STATE_SLOTS; k++) state[k] = awkward_amax(&r) + (float)k;
    gln_twin_t dstate = gln_twin_upload(g_cu, state, sizeof state);
    for (size_t s = 0; s < NSEL; s++) {
        const sel_t *q = &SELECTIONS[s];
        const size_t bytes = (size_t)q->n * 4;
        for (int with_amax = 0; with_amax < 2; with_amax++) {
            memset(scale, 0xFF, sizeof scale), memset(amax, 0xFF, sizeof amax);
            gln_twin_t ds = gln_twin_upload(g_cu, NULL, bytes), da = gln_twin_upload(g_cu, NULL, bytes);
            CHECK_OK(g_cpu->ops->fp8_state_gather(g_cpu, state, q->first, q->stride, q->n, scale,
                                                  with_amax ? amax : NULL));
            CHECK_OK(g_cu->ops->fp8_state_gather(g_cu, dstate.d, q->first, q->stride, q->n, ds.d,
                                                 with_amax ? da.d : NULL));
            fetch_into(&ds, scale_cu, "gathered scale"), fetch_into(&da, amax_cu, "zeroed amax");
            char what[80];
            snprintf(what, sizeof what, "gather selection %zu (amax %d): scale", s, with_amax);
            gln_check_bitwise(what, scale_cu, scale, bytes);
            snprintf(what, sizeof what, "gather selection %zu (amax %d): amax", s, with_amax);
            gln_check_bitwise(what, amax_cu, amax, bytes); /* zeros, or both still poisoned */
            gln_twin_free(g_cu, &ds), gln_twin_free(g_cu, &da);
        }
    }
    gln_twin_free(g_cu, &dstate);
}

static void test_record(void) {
    gln_rng_t r = gln_rng_seed(93);
    float row0[STATE_SLOTS], amax[STATE_SLOTS], row0_cu[STATE_SLOTS];
    for (int nanp = 0; nanp < 2; nanp++)
        for (size_t s = 0; s < NSEL; s++) {
            const sel_t *q = &SELECTIONS[s];
            for (int k = 0; k < STATE_SLOTS; k++) row0[k] = awkward_amax(&r);
            for (int32_t i = 0; i < q->n; i++) amax[i] = awkward_amax(&r);
            gln_twin_t dr = gln_twin_upload(g_cu, row0, sizeof row0), da = gln_twin_upload(g_cu, amax, (size_t)q->n * 4);
            CHECK_OK(g_cpu->ops->fp8_state_record(g_cpu, row0, q->first, q->stride, q->n, amax, nanp));
            CHECK_OK(g_cu->ops->fp8_state_record(g_cu, dr.d, q->first, q->stride, q->n, da.d, nanp));
            fetch_into(&dr, row0_cu, "history row 0");
            char what[80];
            snprintf(what, sizeof what, "record selection %zu, nan_propagate %d", s, nanp);
            gln_check_bitwise(what, row0_cu, row0, sizeof row0);
            gln_twin_free(g_cu, &dr), gln_twin_free(g_cu, &da);
        }
}

/* ---- a captured step --------------------------------------------------------------------------- */

#if defined(GLN_TEST_HAVE_CUDA)
/* GN members of [GR, GC] bf16 each; forward-like slots 3i (3·GN slots), history GLEN. */
enum { GN = 5, GR = 33, GC = 48, GLEN = 4, GSLOTS = 3 * GN, REPLAYS = 4 };
#define GX (GN * GR * GC)

/* The buffers of one step, on either backend. */
typedef struct gstep {
    uint16_t *x;
    uint8_t *q;
    float *scale_inv, *scale, *amax;      /* [GN] the quantizations' */
    float *st_scale, *st_hist, *st_fmax;  /* the state */
} gstep_t;

static const size_t GSTEP_BYTES[] = {GX * 2, GX, GN * 4, GN * 4, GN * 4, GSLOTS * 4, GLEN * GSLOTS * 4, GSLOTS * 4};

static void **gstep_field(gstep_t *b, int i) {
    void **f[] = {(void **)&b->x, (void **)&b->q, (void **)&b->scale_inv, (void **)&b->scale,
                  (void **)&b->amax, (void **)&b->st_scale, (void **)&b->st_hist, (void **)&b->st_fmax};
    return f[i];
}

/* The state of a fresh layer: scales 1, history 0, fp8_max of E4M3. */
static void gstep_alloc(gln_context_t *ctx, gstep_t *b) {
    static const float zeros[GLEN * GSLOTS];
    float ones[GSLOTS], fmax[GSLOTS];
    for (int k = 0; k < GSLOTS; k++) ones[k] = 1.0f, fmax[k] = 448.0f;
    for (int i = 0; i < 8; i++) CHECK_OK(gln_malloc(ctx, GSTEP_BYTES[i], gstep_field(b, i)));
    CHECK_OK(gln_memcpy(ctx, b->st_hist, zeros, sizeof zeros, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_memcpy(ctx, b->st_scale, ones, sizeof ones, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_memcpy(ctx, b->st_fmax, fmax, sizeof fmax, GLN_COPY_HOST_TO_BACKEND));
}

static void gstep_free(gln_context_t *ctx, gstep_t *b) {
    for (int i = 0; i < 8; i++) CHECK_OK(gln_free(ctx, *gstep_field(b, i)));
}

/* Stage, quantize each member with its delayed scale, record, update: what a layer forward does
 * with its input slots. */
static gln_status_t gstep_run(gln_context_t *ctx, const gstep_t *b) {
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    o.amax_nan_propagate = 1;
    GLN_TRY(ctx->ops->fp8_state_gather(ctx, b->st_scale, 0, 3, GN, b->scale, b->amax));
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.delayed = 1;
    cfg.amax_nan_propagate = 1;
    for (int i = 0; i < GN; i++) {
        gln_tensor_t in = gln_tensor_make(GLN_DTYPE_BF16, GR, GC, b->x + (size_t)i * GR * GC);
        gln_tensor_t out = {GLN_DTYPE_FP8_E4M3, GR, GC, b->q + (size_t)i * GR * GC, GLN_SCALING_TENSOR,
                            &b->scale_inv[i], NULL, NULL, &b->amax[i], &b->scale[i]};
        GLN_TRY(gln_quantize(ctx, &cfg, &in, &out));
    }
    GLN_TRY(ctx->ops->fp8_state_record(ctx, b->st_hist, 0, 3, GN, b->amax, 1));
    return ctx->ops->fp8_state_update(ctx, GSLOTS, GLEN, b->st_hist, b->st_scale, b->st_fmax, 1, GLN_AMAX_ALGO_MAX,
                                      &o);
}

/* Replay `rep`'s input: magnitudes change per replay (so scales move), member 2 is all zeros (no
 * amax: its slots are not rolled), member 4 holds a NaN in replay 1 (propagated: scale kept). */
static void gstep_input(int rep, uint16_t *x) {
    gln_rng_t r = gln_rng_seed(100 + (uint64_t)rep);
    for (int i = 0; i < GN; i++)
        for (int j = 0; j < GR * GC; j++) {
            float v = (float)gln_rng_uniform(&r, -1.0, 1.0) * ldexpf(1.0f, rep * 3 - i);
            if (i == 2) v = 0.0f;
            if (i == 4 && rep == 1 && j == 17) v = NAN;
            x[(size_t)i * GR * GC + (size_t)j] = gln_fp32_to_bf16(v);
        }
}

/* Everything a replay produced, on the host. */
typedef struct gresult {
    uint8_t q[GX];
    float st_scale[GSLOTS], st_hist[GLEN * GSLOTS];
} gresult_t;

static void gstep_read(gln_context_t *ctx, const gstep_t *b, gresult_t *res) {
    CHECK_OK(gln_memcpy(ctx, res->q, b->q, GX, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(ctx, res->st_scale, b->st_scale, sizeof res->st_scale, GLN_COPY_BACKEND_TO_HOST));
    CHECK_OK(gln_memcpy(ctx, res->st_hist, b->st_hist, sizeof res->st_hist, GLN_COPY_BACKEND_TO_HOST));
}

static void test_graph_capture(void) {
    cudaStream_t user;
    CHECK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking) == cudaSuccess);
    gln_context_options_t opt = GLN_CONTEXT_OPTIONS_INIT;
    opt.backend = GLN_BACKEND_CUDA;
    opt.stream = user;
    gln_context_t *cu = NULL;
    CHECK_OK(gln_context_create(&opt, &cu));
    if (!cu) return;
    gstep_t d, h;
    gstep_alloc(cu, &d);
    gstep_alloc(g_cpu, &h);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(user, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    gln_status_t st = gstep_run(cu, &d);
    CHECK(cudaStreamEndCapture(user, &graph) == cudaSuccess);
    CHECK_MSG(st == GLN_STATUS_SUCCESS, "the step under capture: %s", gln_last_error());
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    static gresult_t got, want;
    for (int rep = 0; rep < REPLAYS && exec; rep++) {
        gstep_input(rep, h.x);
        CHECK_OK(gln_memcpy(cu, d.x, h.x, GX * 2, GLN_COPY_HOST_TO_BACKEND));
        CHECK(cudaGraphLaunch(exec, user) == cudaSuccess);
        CHECK_OK(gstep_run(g_cpu, &h));
        gstep_read(cu, &d, &got);
        gstep_read(g_cpu, &h, &want);
        char what[80];
        snprintf(what, sizeof what, "replay %d: quantized x, graph vs cpu", rep);
        gln_check_bitwise(what, got.q, want.q, GX);
        snprintf(what, sizeof what, "replay %d: state scales, graph vs cpu", rep);
        gln_check_bitwise(what, got.st_scale, want.st_scale, sizeof got.st_scale);
        snprintf(what, sizeof what, "replay %d: amax history, graph vs cpu", rep);
        gln_check_bitwise(what, got.st_hist, want.st_hist, sizeof got.st_hist);
    }
    /* the data moved the scales: the state really was updated inside the graph */
    CHECK(got.st_scale[0] != 1.0f && got.st_scale[6] == 1.0f);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    CHECK_OK(gln_context_async_error(cu));
    gstep_free(cu, &d);
    gstep_free(g_cpu, &h);
    CHECK_OK(gln_context_destroy(cu));
    CHECK(cudaStreamDestroy(user) == cudaSuccess);
}
#endif

static const gln_test_case_t k_cases[] = {
    GLN_CASE(test_update), GLN_CASE(test_update_long), GLN_CASE(test_gather), GLN_CASE(test_record),
#if defined(GLN_TEST_HAVE_CUDA)
    GLN_CASE(test_graph_capture),
#endif
};

int main(int argc, char **argv) {
    return gln_test_cuda_main(argc, argv, &g_cpu, &g_cu, k_cases, sizeof k_cases / sizeof k_cases[0]);
}
