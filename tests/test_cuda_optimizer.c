/* The CUDA optimizer step (cuda_optimizer.cu) against its CPU twin (cpu_optimizer.c), bit for
 * bit: master, exp_avg, exp_avg_sq, the working copy and the per-segment amax.
 *
 *   kinds     Adam (decoupled and L2 weight decay, with and without), SGD (with and without
 *             momentum and weight decay); steps 1, 2 and 1000
 *   working   none, fp32 (a copy, and aliasing the master), bf16, fp16
 *   layout    sizes around the kernel's 4-element groups and 4096-element chunks; buffers 16-byte
 *             aligned (float4 path) and 4 bytes off (scalar path)
 *   values    NaN with payloads and signs, Inf, -0, subnormals, values at bf16 halfway points
 *   segments  none, host bounds carried in the kernel's parameters, host bounds staged to the
 *             device (more than 256 segments), device bounds; empty segments, segments shorter
 *             than a chunk, boundaries inside chunks, gaps before the first and after the last
 * Outputs are poisoned first and guarded (device twins).  Skips (77) without a CUDA device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "device_twin.h"
#include "harness.h"
#include "numerics/numerics.h"

static gln_context_t *g_cpu, *g_cuda;

/* Random values with specials sprinkled in (seeded). */
static void fill(float *x, int64_t n, uint64_t seed, double scale, int specials, int nonneg) {
    gln_rng_t r = gln_rng_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        double v = gln_rng_normal(&r) * scale;
        x[i] = (float)(nonneg ? fabs(v) : v);
    }
    if (!specials || n < 64) return;
    static const uint32_t pats[] = {0x7FC01234u, 0xFFA00001u, 0x7F800000u, 0xFF800000u, 0x80000000u,
                                    0x00000003u, 0x80400000u, 0x3F808000u /* 1 + bf16 half ulp */};
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        int64_t i = (int64_t)gln_rng_int(&r, 0, n - 1);
        uint32_t b = pats[k];
        if (nonneg) b &= 0x7FFFFFFFu;
        memcpy(&x[i], &b, 4);
    }
}

typedef struct bufs {
    gln_twin_t w, g, m, v, wk, amax, bounds;
} bufs_t;

static gln_optimizer_config_t config(int k) {
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.lr = 0.01f;
    switch (k) {
    case 0: break;                                           /* AdamW, wd 0 */
    case 1: c.weight_decay = 0.1f; break;                    /* AdamW */
    case 2: c.weight_decay = 0.1f; c.adam_w_mode = 0; break; /* Adam, L2 */
    case 3: c.kind = GLN_OPTIMIZER_SGD; break;
    case 4: c.kind = GLN_OPTIMIZER_SGD; c.momentum = 0.9f; c.weight_decay = 0.01f; break;
    default: c.kind = GLN_OPTIMIZER_SGD; c.weight_decay = 0.01f; break;
    }
    return c;
}
#define NCONFIGS 6

/* One comparison: the same step on both backends, then every buffer compared. */
static void compare(int k, int64_t step, int64_t n, gln_dtype_t wdt, int alias, size_t skew, const int64_t *bounds,
                    int32_t nseg, int bounds_on_device, int specials) {
    const gln_optimizer_config_t c = config(k);
    gln_optimizer_params_t p;
    CHECK_OK(gln_optimizer_resolve("test", &c, step, &p));
    const int has_m = c.kind == GLN_OPTIMIZER_ADAM || c.momentum != 0.0f, has_v = c.kind == GLN_OPTIMIZER_ADAM;
    const size_t nb = (size_t)n * 4, wsz = gln_dtype_size(wdt);
    float *h = malloc(nb ? nb : 4);
    bufs_t b;
    memset(&b, 0, sizeof b);
    fill(h, n, 100 + (uint64_t)k, 1.0, specials, 0);
    b.w = gln_twin_input(g_cuda, h, nb, skew);
    fill(h, n, 200 + (uint64_t)k, 1e-2, specials, 0);
    b.g = gln_twin_input(g_cuda, h, nb, skew);
    fill(h, n, 300 + (uint64_t)k, 1e-3, specials, 0);
    if (has_m) b.m = gln_twin_input(g_cuda, h, nb, skew);
    fill(h, n, 400 + (uint64_t)k, 1e-4, specials, 1);
    if (has_v) b.v = gln_twin_input(g_cuda, h, nb, skew);
    const int has_wk = wdt != GLN_DTYPE_COUNT_ && !alias;
    if (has_wk) b.wk = gln_twin_new(g_cuda, (size_t)n * wsz, 0xFFu, wsz == 4 ? skew : skew / 2);
    if (nseg > 0) {
        b.amax = gln_twin_new(g_cuda, (size_t)nseg * 4, 0xFFu, 0);
        b.bounds = gln_twin_input(g_cuda, bounds, (size_t)(nseg + 1) * 8, 0);
    }
    const gln_dtype_t dt = wdt == GLN_DTYPE_COUNT_ ? GLN_DTYPE_FP32 : wdt;
    void *wk_h = alias ? b.w.h : b.wk.h, *wk_d = alias ? b.w.d : b.wk.d;
    int ready = b.w.d && b.g.d && (!has_m || b.m.d) && (!has_v || b.v.d) && (!has_wk || b.wk.d) &&
                (nseg == 0 || (b.amax.d && b.bounds.d));
    if (ready) {
        CHECK_OK(gln_op_optimizer_step(g_cpu, "test", &p, b.w.h, b.g.h, b.m.h, b.v.h, n, wk_h, dt, nseg, bounds, 0,
                                       b.amax.h));
        CHECK_OK(gln_op_optimizer_step(g_cuda, "test", &p, b.w.d, b.g.d, b.m.d, b.v.d, n, wk_d, dt, nseg,
                                       bounds_on_device ? b.bounds.d : bounds, bounds_on_device, b.amax.d));
        char what[160];
        snprintf(what, sizeof what, "config %d step %lld n %lld working %s%s skew %zu nseg %d%s", k, (long long)step,
                 (long long)n, wdt == GLN_DTYPE_COUNT_ ? "none" : gln_dtype_name(wdt), alias ? " (alias)" : "", skew,
                 (int)nseg, bounds_on_device ? " (device bounds)" : "");
        gln_twin_check(g_cuda, &b.w, 4, what, "master", NULL, NULL);
        gln_twin_check(g_cuda, &b.g, 4, what, "grad (read only)", NULL, NULL);
        if (has_m) gln_twin_check(g_cuda, &b.m, 4, what, "exp_avg", NULL, NULL);
        if (has_v) gln_twin_check(g_cuda, &b.v, 4, what, "exp_avg_sq", NULL, NULL);
        if (has_wk) gln_twin_check(g_cuda, &b.wk, wsz == 4 ? 4 : 1, what, "working", NULL, NULL);
        if (nseg > 0) gln_twin_check(g_cuda, &b.amax, 4, what, "amax", NULL, NULL);
    }
    gln_twin_free(g_cuda, &b.w);
    gln_twin_free(g_cuda, &b.g);
    gln_twin_free(g_cuda, &b.m);
    gln_twin_free(g_cuda, &b.v);
    gln_twin_free(g_cuda, &b.wk);
    gln_twin_free(g_cuda, &b.amax);
    gln_twin_free(g_cuda, &b.bounds);
    free(h);
}

/* Every kind, working dtype, size and alignment, without segments. */
static void test_step(void) {
    const int64_t sizes[] = {1, 3, 4, 5, 4095, 4096, 4099, 100003};
    const gln_dtype_t dts[] = {GLN_DTYPE_COUNT_ /* none */, GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    const int64_t steps[] = {1, 2, 1000};
    for (int k = 0; k < NCONFIGS; k++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (int d = 0; d < 4; d++)
                for (size_t skew = 0; skew <= 4; skew += 4)
                    compare(k, steps[(si + (size_t)d) % 3], sizes[si], dts[d], 0, skew, NULL, 0, 0, 1);
    for (int k = 0; k < NCONFIGS; k++) compare(k, 3, 10007, GLN_DTYPE_FP32, 1, 0, NULL, 0, 0, 1);
}

/* Random non-decreasing bounds in [lo, hi]: some equal (empty segments), some close together. */
static int64_t *random_bounds(int32_t nseg, int64_t lo, int64_t hi, uint64_t seed) {
    int64_t *b = malloc((size_t)(nseg + 1) * 8);
    gln_rng_t r = gln_rng_seed(seed);
    for (int32_t s = 0; s <= nseg; s++) b[s] = gln_rng_int(&r, lo, hi);
    for (int32_t s = 1; s <= nseg; s++) /* insertion sort */
        for (int32_t t = s; t > 0 && b[t - 1] > b[t]; t--) {
            int64_t x = b[t];
            b[t] = b[t - 1];
            b[t - 1] = x;
        }
    for (int32_t s = 1; s <= nseg; s += 7) b[s] = b[s - 1]; /* empty segments */
    return b;
}

static void test_segments(void) {
    const int64_t n = 50001;
    /* expert-like: a few long segments, boundaries inside chunks, a gap at each end */
    const int64_t experts[] = {10, 4096, 12000, 12000, 33333, 49990};
    for (int k = 0; k < NCONFIGS; k += 2)
        for (size_t skew = 0; skew <= 4; skew += 4) {
            compare(k, 1, n, GLN_DTYPE_BF16, 0, skew, experts, 5, 0, 1);
            compare(k, 5, n, GLN_DTYPE_BF16, 0, skew, experts, 5, 1, 1);
            compare(k, 5, n, GLN_DTYPE_FP16, 0, skew, experts, 5, 0, 1);
            compare(k, 5, n, GLN_DTYPE_FP32, 0, skew, experts, 5, 0, 1);
            compare(k, 5, n, GLN_DTYPE_FP32, 1, skew, experts, 5, 0, 1);
            compare(k, 5, n, GLN_DTYPE_COUNT_, 0, skew, experts, 5, 0, 1);
        }
    /* one segment covering everything, in one chunk and over many */
    const int64_t all_small[] = {0, 7};
    compare(0, 2, 7, GLN_DTYPE_BF16, 0, 0, all_small, 1, 0, 0);
    const int64_t all[] = {0, n};
    compare(0, 2, n, GLN_DTYPE_BF16, 0, 0, all, 1, 0, 1);
    /* many short segments: inline (256) and staged (300) host bounds, device bounds */
    const int32_t counts[] = {1, 37, 256, 300};
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        int64_t *b = random_bounds(counts[ci], 0, n, 7 + ci);
        compare(1, 4, n, GLN_DTYPE_BF16, 0, 0, b, counts[ci], 0, 1);
        compare(1, 4, n, GLN_DTYPE_BF16, 0, 4, b, counts[ci], 1, 1);
        free(b);
        b = random_bounds(counts[ci], 100, 9000, 70 + ci); /* crowded into the first chunks */
        compare(4, 4, n, GLN_DTYPE_FP16, 0, 0, b, counts[ci], 0, 1);
        free(b);
    }
    /* n = 0 with segments: every amax is 0 */
    const int64_t none[] = {0, 0, 0};
    compare(0, 1, 0, GLN_DTYPE_BF16, 0, 0, none, 2, 0, 0);
}

/* The public call on device memory equals the CPU's (the funnel and validation on both). */
static void test_public_call(void) {
    const int64_t n = 9000;
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT;
    c.weight_decay = 0.05f;
    float *h = malloc((size_t)n * 4);
    fill(h, n, 1, 1.0, 1, 0);
    gln_twin_t w = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    fill(h, n, 2, 1e-2, 1, 0);
    gln_twin_t g = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    memset(h, 0, (size_t)n * 4);
    gln_twin_t m = gln_twin_input(g_cuda, h, (size_t)n * 4, 0), v = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    gln_twin_t wk = gln_twin_new(g_cuda, (size_t)n * 2, 0xFFu, 0);
    if (w.d && g.d && m.d && v.d && wk.d) {
        for (int64_t step = 1; step <= 3; step++) {
            CHECK_OK(gln_optimizer_step(g_cpu, &c, step, w.h, g.h, m.h, v.h, n, wk.h, GLN_DTYPE_BF16));
            CHECK_OK(gln_optimizer_step(g_cuda, &c, step, w.d, g.d, m.d, v.d, n, wk.d, GLN_DTYPE_BF16));
        }
        gln_twin_check(g_cuda, &w, 4, "public call", "master", NULL, NULL);
        gln_twin_check(g_cuda, &m, 4, "public call", "exp_avg", NULL, NULL);
        gln_twin_check(g_cuda, &v, 4, "public call", "exp_avg_sq", NULL, NULL);
        gln_twin_check(g_cuda, &wk, 1, "public call", "working", NULL, NULL);
    }
    gln_twin_free(g_cuda, &w);
    gln_twin_free(g_cuda, &g);
    gln_twin_free(g_cuda, &m);
    gln_twin_free(g_cuda, &v);
    gln_twin_free(g_cuda, &wk);
    free(h);
}

/* cfg->bias_corrections in device memory, rewritten between calls (as a replayed capture sees
 * them): the kernel reads them when it runs and equals the CPU given the same values. */
static void test_bias_corrections_on_device(void) {
    const int64_t n = 5000;
    gln_optimizer_config_t c = GLN_OPTIMIZER_CONFIG_INIT, ch = GLN_OPTIMIZER_CONFIG_INIT;
    float *h = malloc((size_t)n * 4), bc[2];
    fill(h, n, 11, 1.0, 0, 0);
    gln_twin_t w = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    fill(h, n, 12, 1e-2, 0, 0);
    gln_twin_t g = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    memset(h, 0, (size_t)n * 4);
    gln_twin_t m = gln_twin_input(g_cuda, h, (size_t)n * 4, 0), v = gln_twin_input(g_cuda, h, (size_t)n * 4, 0);
    void *dbc = NULL;
    CHECK_OK(gln_malloc(g_cuda, sizeof bc, &dbc));
    c.bias_corrections = dbc;
    if (w.d && g.d && m.d && v.d && dbc) {
        for (int64_t step = 1; step <= 3; step++) {
            bc[0] = (float)(1.0 - pow((double)0.9f, (double)(step + 10)));
            bc[1] = (float)(1.0 - pow((double)0.999f, (double)(step + 10)));
            CHECK_OK(gln_memcpy(g_cuda, dbc, bc, sizeof bc, GLN_COPY_HOST_TO_BACKEND));
            CHECK_OK(gln_optimizer_step(g_cpu, &ch, step + 10, w.h, g.h, m.h, v.h, n, NULL, GLN_DTYPE_BF16));
            CHECK_OK(gln_optimizer_step(g_cuda, &c, 1, w.d, g.d, m.d, v.d, n, NULL, GLN_DTYPE_BF16));
        }
        gln_twin_check(g_cuda, &w, 4, "bias corrections on the device", "master", NULL, NULL);
        gln_twin_check(g_cuda, &m, 4, "bias corrections on the device", "exp_avg", NULL, NULL);
        gln_twin_check(g_cuda, &v, 4, "bias corrections on the device", "exp_avg_sq", NULL, NULL);
    }
    if (dbc) CHECK_OK(gln_free(g_cuda, dbc));
    gln_twin_free(g_cuda, &w);
    gln_twin_free(g_cuda, &g);
    gln_twin_free(g_cuda, &m);
    gln_twin_free(g_cuda, &v);
    free(h);
}

GLN_TEST_CUDA_MAIN(g_cpu, g_cuda, GLN_CASE(test_step), GLN_CASE(test_segments), GLN_CASE(test_public_call),
                   GLN_CASE(test_bias_corrections_on_device))
