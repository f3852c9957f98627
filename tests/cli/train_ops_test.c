/* The training tool's kernels (tools/train_ops_cuda.cu) against their CPU loops (tools/train_ops.c):
 * each op runs on a CPU context into host buffers and on a CUDA context into device buffers from
 * the same inputs (device outputs poisoned first), and the results must agree -- bit for bit for
 * zero fill, the embedding and its backward, dlogits, the windows and the --exact-data grid
 * rounding; within TOL_* for the softmax cross-entropy (device expf / log), the bias gradient and
 * the loss sum (fixed-order chunked sums instead of one chain) and the device clock's bias
 * corrections (device pow).  Twice on the device must give the same bits.
 * The tool's optimizer is the library's gln_optimizer_step (tested with the library); here, the
 * step clock that feeds it: on the CPU, a step reading the clock's corrections equals bit for bit
 * the step given the 1-based count clock->step + 1 (what the models pass when there is no clock),
 * and on the device a step reading the device clock follows the CPU's.
 * The CPU part runs everywhere; exit 77 after it without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task.h"
#include "train_ops.h"

#define TOL_CE 1e-5      /* relative, probabilities and per-token losses (a few ulp of expf / log) */
#define TOL_SUM 1e-5     /* relative to the sum of magnitudes: re-associated FP32 sums of <= 1000 terms */
#define TOL_BC 1e-6      /* relative, bias corrections through the device pow */

static int failures;
static gln_context_t *cpu, *cu;

#define FAIL(...)                                                                               \
    do {                                                                                        \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                    \
        fprintf(stderr, __VA_ARGS__);                                                           \
        fprintf(stderr, "\n");                                                                  \
        failures++;                                                                             \
    } while (0)
#define OK(expr)                                                                                \
    do {                                                                                        \
        gln_status_t st_ = (expr);                                                              \
        if (st_ != GLN_STATUS_SUCCESS) FAIL("%s -> %s (%s)", #expr, gln_status_string(st_), gln_last_error()); \
    } while (0)

/* A device copy of host bytes (or `bytes` of 0xFF poison when h is NULL). */
static void *dev(const void *h, size_t bytes) {
    void *d = NULL;
    OK(gln_malloc(cu, bytes ? bytes : 1, &d));
    if (!d) return NULL;
    if (h) {
        OK(gln_memcpy(cu, d, h, bytes, GLN_COPY_HOST_TO_BACKEND));
    } else {
        void *p = malloc(bytes ? bytes : 1);
        memset(p, 0xFF, bytes ? bytes : 1);
        OK(gln_memcpy(cu, d, p, bytes, GLN_COPY_HOST_TO_BACKEND));
        free(p);
    }
    return d;
}

static void *back(const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    OK(gln_memcpy(cu, h, d, bytes, GLN_COPY_BACKEND_TO_HOST));
    return h;
}

static void same_bits(const char *what, const void *host, const void *d, size_t bytes) {
    unsigned char *got = back(d, bytes);
    const unsigned char *want = host;
    for (size_t i = 0; i < bytes; i++)
        if (got[i] != want[i]) {
            FAIL("%s: first difference at byte %zu of %zu (cuda %02x, cpu %02x)", what, i, bytes, got[i], want[i]);
            break;
        }
    free(got);
}

static void close_f32(const char *what, const float *host, const void *d, size_t n, double rtol, double atol) {
    float *got = back(d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - host[i]) <= atol + rtol * fabs((double)host[i]))) {
            FAIL("%s: [%zu] cuda %.9g cpu %.9g", what, i, got[i], host[i]);
            break;
        }
    free(got);
}

static float *randf(tool_rng_t *r, size_t n, double scale) {
    float *p = malloc(n * sizeof *p + 4);
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * tool_rng_normal(r));
    return p;
}

static uint8_t *randb(tool_rng_t *r, size_t n) {
    uint8_t *p = malloc(n + 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tool_rng_u64(r) % 7 == 0 ? 'e' : tool_rng_u64(r));
    return p;
}

/* Adam inputs of n elements: weights, small gradients, moments. */
static void adam_inputs(tool_rng_t *r, int64_t n, float **w, float **g, float **m, float **v) {
    *w = randf(r, n, 1), *g = randf(r, n, 1e-3), *m = randf(r, n, 1e-4), *v = randf(r, n, 0);
    for (int64_t i = 0; i < n; i++) (*v)[i] = (float)fabs((*g)[i]) * 1e-3f;
}

static void same_host(const char *what, const float *a, const float *b, int64_t n) {
    if (memcmp(a, b, (size_t)n * sizeof *a) != 0) FAIL("%s: the two steps differ", what);
}

static float *copyf(const float *p, int64_t n) {
    float *q = malloc((size_t)n * sizeof *q + 4);
    memcpy(q, p, (size_t)n * sizeof *q);
    return q;
}

/* On the CPU: three steps reading the host clock's corrections (top_optimizer_config with the
 * clock, and a `step` argument of 1 that they must not depend on) equal, bit for bit, three steps
 * with no clock and the 1-based count clock.step + 1 -- the clock and the models' step counts
 * agree.  The clock starts at -1 and counts 0, 1, 2. */
static void test_clock_host(void) {
    tool_rng_t r = tool_rng_seed(1, 2);
    const int64_t n = 1031;
    float *w, *g, *m, *v;
    adam_inputs(&r, n, &w, &g, &m, &v);
    float *w2 = copyf(w, n), *m2 = copyf(m, n), *v2 = copyf(v, n);
    top_clock_t hc;
    OK(top_clock_reset(cpu, &hc));
    if (hc.step != -1) FAIL("clock reset: step %lld, want -1", (long long)hc.step);
    for (int s = 0; s < 3; s++) {
        OK(top_clock_tick(cpu, &hc));
        if (hc.step != s) FAIL("clock tick %d: step %lld", s, (long long)hc.step);
        const gln_optimizer_config_t with = top_optimizer_config(1e-3f, &hc), without = top_optimizer_config(1e-3f, NULL);
        if (with.bias_corrections != &hc.bc1 || without.bias_corrections)
            FAIL("top_optimizer_config: bias_corrections %p / %p", (const void *)with.bias_corrections,
                 (const void *)without.bias_corrections);
        OK(gln_optimizer_step(cpu, &with, 1, w, g, m, v, n, NULL, GLN_DTYPE_FP32));
        OK(gln_optimizer_step(cpu, &without, hc.step + 1, w2, g, m2, v2, n, NULL, GLN_DTYPE_FP32));
    }
    same_host("clock step vs counted step: w", w, w2, n);
    same_host("clock step vs counted step: m", m, m2, n);
    same_host("clock step vs counted step: v", v, v2, n);
    /* the step moved the weights (a step that did nothing would also agree) */
    tool_rng_t r0 = tool_rng_seed(1, 2);
    float *w0 = randf(&r0, n, 1);
    int64_t moved = 0;
    for (int64_t i = 0; i < n; i++) moved += w[i] != w0[i];
    if (moved < n / 2) FAIL("clock step: only %lld of %lld weights moved", (long long)moved, (long long)n);
    free(w0);
    free(w), free(g), free(m), free(v), free(w2), free(m2), free(v2);
}

/* The device clock against the host's (tolerance: device pow), and the optimizer step reading it
 * on the device against the CPU's step reading the host clock: moments bitwise (they do not
 * depend on the corrections), weights within the corrections' tolerance. */
static void test_clock_device(void) {
    tool_rng_t r = tool_rng_seed(1, 1);
    const int64_t n = 10007;
    top_clock_t hc, *dc = dev(NULL, sizeof hc);
    OK(top_clock_reset(cpu, &hc));
    OK(top_clock_reset(cu, dc));
    float *w, *g, *m, *v;
    adam_inputs(&r, n, &w, &g, &m, &v);
    float *dw = dev(w, n * 4), *dg = dev(g, n * 4), *dm = dev(m, n * 4), *dv = dev(v, n * 4);
    for (int step = 0; step < 3; step++) {
        OK(top_clock_tick(cpu, &hc));
        OK(top_clock_tick(cu, dc));
        top_clock_t *got = back(dc, sizeof hc);
        if (got->step != hc.step || fabs(got->bc1 - hc.bc1) > TOL_BC * hc.bc1 || fabs(got->bc2 - hc.bc2) > TOL_BC * hc.bc2)
            FAIL("clock step %d: cuda (%lld, %g, %g) cpu (%lld, %g, %g)", step, (long long)got->step, got->bc1,
                 got->bc2, (long long)hc.step, hc.bc1, hc.bc2);
        free(got);
        const gln_optimizer_config_t hcfg = top_optimizer_config(1e-3f, &hc), dcfg = top_optimizer_config(1e-3f, dc);
        OK(gln_optimizer_step(cpu, &hcfg, hc.step + 1, w, g, m, v, n, NULL, GLN_DTYPE_FP32));
        OK(gln_optimizer_step(cu, &dcfg, hc.step + 1, dw, dg, dm, dv, n, NULL, GLN_DTYPE_FP32));
    }
    close_f32("adam w (device clock)", w, dw, (size_t)n, 1e-6, 1e-9);
    same_bits("adam m", m, dm, n * 4);
    same_bits("adam v", v, dv, n * 4);
    void *d[] = {dc, dw, dg, dm, dv};
    for (size_t i = 0; i < 5; i++) OK(gln_free(cu, d[i]));
    free(w), free(g), free(m), free(v);
}

/* skew: 1 = byte 'e' in about 90 % of the (token, position) pairs (one very long key list per
 * position), else randb's mix (1/7 'e'). */
static uint8_t *embed_bytes(tool_rng_t *r, size_t n, int skew) {
    if (!skew) return randb(r, n);
    uint8_t *p = malloc(n + 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tool_rng_u64(r) % 10 != 0 ? 'e' : tool_rng_u64(r));
    return p;
}

/* The device's embedding backward into a freshly poisoned gemb, twice: both runs must have the
 * CPU loop's bits. */
static void embed_backward_twice(const float *ge, const float *ddx, const uint8_t *db, int64_t T, int64_t C,
                                 int64_t H, float *dge, size_t ne, const char *label) {
    char what[128];
    for (int run = 0; run < 2; run++) {
        unsigned char *poison = malloc(ne * 4);
        memset(poison, 0xFF, ne * 4);
        OK(gln_memcpy(cu, dge, poison, ne * 4, GLN_COPY_HOST_TO_BACKEND));
        free(poison);
        OK(top_embed_backward(cu, ddx, db, T, C, H, 0, dge));
        snprintf(what, sizeof what, "embed backward%s (T %lld, C %lld, H %lld%s)", run ? " again" : "",
                 (long long)T, (long long)C, (long long)H, label);
        same_bits(what, ge, dge, ne * 4);
    }
}

static void test_embed(int64_t T, int64_t C, int64_t H, int skew) {
    tool_rng_t r = tool_rng_seed(2, (uint64_t)(T * 31 + H + skew));
    const size_t ne = (size_t)(C * 256 * H);
    float *emb = randf(&r, ne, 1), *dx = randf(&r, (size_t)(T * H), 1);
    uint8_t *bytes = embed_bytes(&r, (size_t)(T * C), skew);
    float *x = malloc((size_t)(T * H) * 4 + 4), *ge = malloc(ne * 4);
    float *demb = dev(emb, ne * 4), *ddx = dev(dx, (size_t)(T * H) * 4);
    uint8_t *db = dev(bytes, (size_t)(T * C));
    float *dxo = dev(NULL, (size_t)(T * H) * 4), *dge = dev(NULL, ne * 4);
    OK(top_embed(cpu, emb, bytes, T, C, H, x));
    OK(top_embed(cu, demb, db, T, C, H, dxo));
    same_bits("embed x", x, dxo, (size_t)(T * H) * 4);
    OK(top_embed_backward(cpu, dx, bytes, T, C, H, 0, ge));
    embed_backward_twice(ge, ddx, db, T, C, H, dge, ne, skew ? ", skewed" : "");
    /* gradient accumulation: a second microbatch's sums continue from the first's, bitwise */
    OK(top_embed_backward(cpu, dx, bytes, T, C, H, 1, ge));
    OK(top_embed_backward(cu, ddx, db, T, C, H, 1, dge));
    same_bits(skew ? "embed backward, accumulated, skewed" : "embed backward, accumulated", ge, dge, ne * 4);
    void *d[] = {demb, ddx, db, dxo, dge};
    for (size_t i = 0; i < 5; i++) OK(gln_free(cu, d[i]));
    free(emb), free(dx), free(bytes), free(x), free(ge);
}

/* Past the kernel's int32 indices the call is refused before anything is read or written. */
static void test_embed_limit(void) {
    const int64_t C = 1, H = 4, T = TOP_EMBED_BWD_MAX_PAIRS + 1;
    const size_t ne = (size_t)(C * 256 * H);
    float *ddx = dev(NULL, 16), *dge = dev(NULL, ne * 4);
    uint8_t *db = dev(NULL, 16);
    const gln_status_t st = top_embed_backward(cu, ddx, db, T, C, H, 0, dge);
    if (st != GLN_STATUS_NOT_SUPPORTED)
        FAIL("embed backward with T*C = %lld: %s, expected not supported", (long long)(T * C), gln_status_string(st));
    OK(gln_synchronize(cu));
    unsigned char *g = back(dge, ne * 4);
    for (size_t i = 0; i < ne * 4; i++)
        if (g[i] != 0xFF) {
            FAIL("embed backward with T*C = %lld wrote gemb byte %zu", (long long)(T * C), i);
            break;
        }
    free(g);
    void *d[] = {ddx, dge, db};
    for (size_t i = 0; i < 3; i++) OK(gln_free(cu, d[i]));
}

static void test_head(int64_t T) {
    tool_rng_t r = tool_rng_seed(3, (uint64_t)T);
    float *rows = randf(&r, (size_t)(T * 256), 3), *bias = randf(&r, 256, 0.5);
    uint8_t *next = randb(&r, (size_t)T);
    double *loss = malloc((size_t)T * 8 + 8), sum = 0;
    float *gb = malloc(256 * 4);
    float *drows = dev(rows, (size_t)(T * 256) * 4), *dbias = dev(bias, 1024), *dgb = dev(NULL, 1024);
    uint8_t *dnext = dev(next, (size_t)T);
    double *dloss = dev(NULL, (size_t)T * 8), *dsum = dev(NULL, 8);
    OK(top_softmax_ce(cpu, rows, bias, next, T, loss));
    OK(top_softmax_ce(cu, drows, dbias, dnext, T, dloss));
    close_f32("softmax probs", rows, drows, (size_t)(T * 256), TOL_CE, 1e-12);
    double *gl = back(dloss, (size_t)T * 8);
    for (int64_t t = 0; t < T; t++)
        if (!(fabs(gl[t] - loss[t]) <= TOL_CE * fabs(loss[t]))) {
            FAIL("loss [%lld]: cuda %.12g cpu %.12g", (long long)t, gl[t], loss[t]);
            break;
        }
    free(gl);
    /* a second microbatch's sum is added to the first's */
    for (int acc = 0; acc < 2; acc++) {
        OK(top_loss_sum(cpu, loss, T, NULL, acc, &sum));
        OK(top_loss_sum(cu, dloss, T, NULL, acc, dsum));
        double *gs = back(dsum, 8);
        if (!(fabs(*gs - sum) <= TOL_SUM * sum)) FAIL("loss sum%s: cuda %.12g cpu %.12g", acc ? " accumulated" : "", *gs, sum);
        free(gs);
    }
    /* dlogits from the CPU's probabilities on both: rows bitwise, bias gradient within a sum's rounding */
    OK(gln_memcpy(cu, drows, rows, (size_t)(T * 256) * 4, GLN_COPY_HOST_TO_BACKEND));
    OK(top_dlogits(cpu, rows, next, T, 1.0f / (float)T, 0, gb));
    OK(top_dlogits(cu, drows, dnext, T, 1.0f / (float)T, 0, dgb));
    same_bits("dlogits", rows, drows, (size_t)(T * 256) * 4);
    close_f32("bias gradient", gb, dgb, 256, TOL_SUM, TOL_SUM);
    /* a second microbatch (the same rows again) adds its column sums to the first's */
    OK(top_dlogits(cpu, rows, next, T, 1.0f, 1, gb));
    OK(top_dlogits(cu, drows, dnext, T, 1.0f, 1, dgb));
    same_bits("dlogits, accumulated", rows, drows, (size_t)(T * 256) * 4);
    close_f32("bias gradient, accumulated", gb, dgb, 256, TOL_SUM, TOL_SUM);
    void *d[] = {drows, dbias, dgb, dnext, dloss, dsum};
    for (size_t i = 0; i < 6; i++) OK(gln_free(cu, d[i]));
    free(rows), free(bias), free(next), free(loss), free(gb);
}

/* The --exact-data grids: bitwise the host's rounding, for values off the grid, on it, past the
 * clamp, ties (n + 1/2 rounds to even), subnormals, signed zeros and infinities (a NaN passes
 * through both, but its payload bits may differ). */
static void test_exact_round(void) {
    tool_rng_t r = tool_rng_seed(5, 5);
    const int64_t n = 3000;
    float *v = randf(&r, (size_t)n, 40);
    const float special[] = {0.0f, -0.0f, 0.5f / 64, 1.5f / 64, -2.5f / 64, 255.0f / 64, 256.0f / 64, -1e30f,
                             1e-40f, -1e-45f, INFINITY, -INFINITY, 1.0f / 3.0f};
    memcpy(v, special, sizeof special);
    for (int frac = 4; frac <= 8; frac += 2) {
        float *dv = dev(v, (size_t)n * 4);
        float *h = malloc((size_t)n * 4);
        memcpy(h, v, (size_t)n * 4);
        OK(top_exact_round(cpu, h, n, frac));
        OK(top_exact_round(cu, dv, n, frac));
        same_bits("exact_round", h, dv, (size_t)n * 4);
        OK(gln_free(cu, dv));
        free(h);
    }
    free(v);
}

static void test_windows(void) {
    tool_rng_t r = tool_rng_seed(4, 4);
    const int64_t size = 5000, train = 4500, C = 8, T = 300;
    uint8_t *text = randb(&r, size), *b = malloc(T * C), *n = malloc(T);
    uint8_t *dt = dev(text, size), *db = dev(NULL, T * C), *dn = dev(NULL, T);
    top_clock_t hc, *dc = dev(NULL, sizeof hc);
    OK(top_clock_reset(cpu, &hc));
    OK(top_clock_reset(cu, dc));
    for (int s = 0; s < 2; s++) {
        OK(top_clock_tick(cpu, &hc));
        OK(top_clock_tick(cu, dc));
        OK(top_train_windows(cpu, text, train, C, 7, &hc, 5, T, b, n));
        OK(top_train_windows(cu, dt, train, C, 7, dc, 5, T, db, dn));
        same_bits("train windows", b, db, T * C);
        same_bits("train targets", n, dn, T);
    }
    OK(top_val_windows(cpu, text, size, train, C, 400, T, b, n)); /* runs past the last window */
    OK(top_val_windows(cu, dt, size, train, C, 400, T, db, dn));
    same_bits("validation windows", b, db, T * C);
    same_bits("validation targets", n, dn, T);
    void *d[] = {dt, db, dn, dc};
    for (size_t i = 0; i < 4; i++) OK(gln_free(cu, d[i]));
    free(text), free(b), free(n);
}

int main(void) {
    gln_context_options_t oc = GLN_CONTEXT_OPTIONS_INIT;
    OK(gln_context_create(&oc, &cpu));
    if (!cpu) return 1;
    test_clock_host();
    gln_context_options_t o = GLN_CONTEXT_OPTIONS_INIT;
    o.backend = GLN_BACKEND_CUDA;
    if (!gln_backend_available(GLN_BACKEND_CUDA) || gln_context_create(&o, &cu) != GLN_STATUS_SUCCESS) {
        gln_context_destroy(cpu);
        if (failures) {
            fprintf(stderr, "%d failure(s)\n", failures);
            return 1;
        }
        printf("CPU part ok; device part skipped: no CUDA device (or no CUDA backend in this build)\n");
        return 77;
    }
    test_clock_device();
    test_embed(1, 1, 1, 0);
    test_embed(777, 8, 96, 0);
    test_embed(300, 3, 2100, 0); /* several column blocks, the last one partial */
    test_embed(5000, 2, 40, 0);  /* 5 grouping chunks; the 'e' lists (1/7 of the bytes, ~720) span 45 cp.async batches */
    /* one byte in ~90 % of the pairs, T not a multiple of 256 (nor of the 1024-token chunk): the
     * 'e' list (~2700 tokens) spans 3 index tiles and ends in a partial cp.async batch */
    test_embed(3001, 4, 264, 1); /* float4 columns: 66, two column blocks, the second nearly empty */
    test_embed(3001, 3, 37, 1);  /* H odd: the scalar path */
    test_embed(2500, 8, 1024, 1); /* the training shape's H and C, at a smaller T */
    test_embed_limit();
    test_head(1);
    test_head(1000);
    test_windows();
    test_exact_round();
    OK(gln_context_async_error(cu));
    gln_context_destroy(cu);
    gln_context_destroy(cpu);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
