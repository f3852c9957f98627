/* The grouped_amax backend slot (the FP8 all-gather's per-expert shard amaxes in one call).
 *
 *   cpu      the CPU slot equals the amax slot on each member, bit for bit (so the sharded
 *            group's amaxes did not change when it moved from a per-expert loop to one call).
 *   cuda     the CUDA slot (one launch for all members, cuda_grouped_amax.cu) equals its CPU twin
 *            bit for bit: FP32 / BF16 / FP16, empty members, rows of 1 and 16 columns, more
 *            members than one kernel batch (256), NaN ignored or propagated (the lowest-index
 *            NaN's payload), Inf, -0; the output is NaN-poisoned first.  Without a CUDA device
 *            this case reports a skip and passes. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "backend/backend.h"
#include "backend/context.h"

typedef struct shape {
    int32_t num;
    int64_t cols;
    int64_t splits[320];
} shape_t;

static int64_t shape_rows(const shape_t *s) {
    int64_t r = 0;
    for (int32_t i = 0; i < s->num; i++) r += s->splits[i];
    return r;
}

/* Random data with specials: NaNs (one with a payload, one negative), Inf, -0. */
static void *make_data(gln_dtype_t dt, size_t n, uint64_t seed, int specials) {
    void *h = malloc(n * gln_dtype_size(dt) + 1);
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < n; i++) gln_store(h, dt, i, gln_rng_normal(&r) * (1 + (double)(i % 13)));
    if (specials && n > 40) {
        gln_store(h, dt, n / 3, -INFINITY);
        gln_store(h, dt, n / 5, -0.0);
        if (dt == GLN_DTYPE_FP32) {
            memcpy((float *)h + n / 2, &(uint32_t){0xFFA12345u}, 4); /* -NaN with a payload */
            memcpy((float *)h + n - 7, &(uint32_t){0x7FC00001u}, 4);
        } else {
            uint16_t nan16 = dt == GLN_DTYPE_BF16 ? 0xFFC3u : 0xFE05u;
            memcpy((uint16_t *)h + n / 2, &nan16, 2);
            memcpy((uint16_t *)h + n - 7, &(uint16_t){(uint16_t)(nan16 & 0x7FFFu)}, 2);
        }
    }
    return h;
}

static void random_shape(shape_t *s, int32_t num, int64_t cols, int64_t max_rows, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    s->num = num;
    s->cols = cols;
    for (int32_t i = 0; i < num; i++) s->splits[i] = i % 5 == 2 ? 0 : gln_rng_int(&r, 0, max_rows);
}

static const shape_t k_shapes[] = {
    {6, 1, {0, 1, 1000, 0, 70001, 3}},
    {4, 16, {5, 0, 4096, 77}},
    {1, 1, {0}},
    {3, 1024, {2, 1, 3}},
};

static void test_cpu_grouped_amax_equals_members(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16};
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        const shape_t *s = &k_shapes[si];
        for (int d = 0; d < 2; d++) {
            for (int nanp = 0; nanp <= 1; nanp++) {
                size_t n = (size_t)(shape_rows(s) * s->cols);
                void *x = make_data(dts[d], n, 7 + si, 1);
                float got[8], want[8];
                memset(got, 0xFF, sizeof got);
                gln_grouped_tensor_t g = {s->num, s->splits, 0, gln_tensor_make(dts[d], shape_rows(s), s->cols, x)};
                CHECK_OK(ctx->ops->grouped_amax(ctx, &g, nanp, got));
                int64_t row = 0;
                for (int32_t i = 0; i < s->num; i++) {
                    gln_tensor_t m = gln_tensor_make(dts[d], s->splits[i], s->cols,
                                                     (char *)x + (size_t)(row * s->cols) * gln_dtype_size(dts[d]));
                    CHECK_OK(ctx->ops->amax(ctx, &m, nanp, &want[i]));
                    row += s->splits[i];
                }
                char what[96];
                snprintf(what, sizeof what, "cpu grouped amax, shape %zu dtype %d nan_propagate %d", si, d, nanp);
                CHECK(gln_check_bitwise(what, got, want, (size_t)s->num * sizeof(float)));
                free(x);
            }
        }
    }
}

static void compare_on_device(gln_context_t *cpu, gln_context_t *cu, const shape_t *s, gln_dtype_t dt, int nanp,
                              uint64_t seed, const char *name) {
    const int64_t rows = shape_rows(s);
    const size_t n = (size_t)(rows * s->cols), bytes = n * gln_dtype_size(dt);
    void *x = make_data(dt, n, seed, 1);
    float *want = malloc((size_t)s->num * sizeof(float)), *got = malloc((size_t)s->num * sizeof(float));
    gln_grouped_tensor_t g = {s->num, s->splits, 0, gln_tensor_make(dt, rows, s->cols, x)};
    CHECK_OK(cpu->ops->grouped_amax(cpu, &g, nanp, want));
    void *xd = NULL, *ad = NULL;
    CHECK_OK(gln_malloc(cu, bytes ? bytes : 1, &xd));
    CHECK_OK(gln_malloc(cu, (size_t)s->num * sizeof(float), &ad));
    if (xd && ad) {
        if (bytes) CHECK_OK(gln_memcpy(cu, xd, x, bytes, GLN_COPY_HOST_TO_BACKEND));
        memset(got, 0xFF, (size_t)s->num * sizeof(float)); /* NaN poison: every member must be written */
        CHECK_OK(gln_memcpy(cu, ad, got, (size_t)s->num * sizeof(float), GLN_COPY_HOST_TO_BACKEND));
        gln_grouped_tensor_t gd = {s->num, s->splits, 0, gln_tensor_make(dt, rows, s->cols, xd)};
        CHECK_OK(cu->ops->grouped_amax(cu, &gd, nanp, (float *)ad));
        CHECK_OK(gln_memcpy(cu, got, ad, (size_t)s->num * sizeof(float), GLN_COPY_BACKEND_TO_HOST));
        char what[128];
        snprintf(what, sizeof what, "cuda vs cpu grouped amax, %s dtype %s nan_propagate %d", name,
                 gln_dtype_name(dt), nanp);
        CHECK(gln_check_bitwise(what, got, want, (size_t)s->num * sizeof(float)));
    }
    gln_free(cu, xd);
    gln_free(cu, ad);
    free(x);
    free(want);
    free(got);
}

static void test_cuda_grouped_amax(void) {
    gln_context_t *cpu = NULL, *cu = NULL;
    int rc = gln_test_cuda_pair(&cpu, &cu);
    CHECK_MSG(rc != 1, "cannot create the contexts");
    if (rc) return;
    const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
    shape_t many;
    random_shape(&many, 300, 16, 40, 5); /* two batches of the kernel */
    for (int d = 0; d < 3; d++)
        for (int nanp = 0; nanp <= 1; nanp++) {
            for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
                char name[32];
                snprintf(name, sizeof name, "shape %zu", si);
                compare_on_device(cpu, cu, &k_shapes[si], dts[d], nanp, 11 + si, name);
            }
            compare_on_device(cpu, cu, &many, dts[d], nanp, 3, "300 members");
        }
    /* a large member spanning the grid-stride loop (more elements than 1024 blocks cover) */
    shape_t big = {2, 1024, {4096, 300}};
    compare_on_device(cpu, cu, &big, GLN_DTYPE_BF16, 1, 21, "large members");
    gln_context_destroy(cu);
    gln_context_destroy(cpu);
}

GLN_TEST_MAIN(GLN_CASE(test_cpu_grouped_amax_equals_members), GLN_CASE(test_cuda_grouped_amax))
