/* Error handling of the grouped linear layer: every invalid config / forward / backward input
 * class returns the right status with a message naming the argument, and writes nothing
 * (outputs are poisoned before and compared after; gradients are compared too). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { N = 3, KIN = 32, KOUT = 16, ROWS = 10 };

static gln_context_t *ctx;

static gln_grouped_linear_config_t base_config(void) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = N;
    c.in_features = KIN;
    c.out_features = KOUT;
    return c;
}

/* Create must fail with `status` and a message containing `needle`; *layer stays NULL. */
static void expect_create(const gln_grouped_linear_config_t *c, gln_status_t status, const char *needle) {
    gln_grouped_linear_t *L = (gln_grouped_linear_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_create(ctx, c, &L), status, needle);
    CHECK(L == NULL);
    if (L && L != (gln_grouped_linear_t *)(uintptr_t)1) gln_grouped_linear_destroy(L);
}

/* A protocol table whose hooks must never be called (create rejects the configs first). */
static int never_called;
static int dw_requires_grad(void *impl) { (void)impl; never_called++; return 1; }
static gln_status_t dw_mat(void *impl, gln_tensor_t *w) { (void)impl; (void)w; never_called++; return GLN_STATUS_SUCCESS; }
static gln_status_t dw_buf(void *impl, int32_t e, float **b) { (void)impl; (void)e; (void)b; never_called++; return GLN_STATUS_SUCCESS; }
static gln_status_t dw_fin(void *impl, int acc, int *p) { (void)impl; (void)acc; (void)p; never_called++; return GLN_STATUS_SUCCESS; }
static gln_status_t dw_wait(void *impl) { (void)impl; never_called++; return GLN_STATUS_SUCCESS; }

static gln_dist_weights_t fake_dist(void) {
    gln_dist_weights_t d = {sizeof(gln_dist_weights_t), NULL, N, KOUT, KIN, dw_requires_grad, dw_mat,
                            dw_mat, dw_mat, dw_buf, dw_fin, dw_wait, NULL};
    return d;
}

static void test_create_errors(void) {
    gln_grouped_linear_config_t c = base_config();
    gln_grouped_linear_t *L = NULL;
    CHECK_STATUS(gln_grouped_linear_create(NULL, &c, &L), GLN_STATUS_INVALID_ARGUMENT, "ctx");
    CHECK_STATUS(gln_grouped_linear_create(ctx, NULL, &L), GLN_STATUS_INVALID_ARGUMENT, "cfg");
    CHECK_STATUS(gln_grouped_linear_create(ctx, &c, NULL), GLN_STATUS_INVALID_ARGUMENT, "layer");

    c = base_config(), c.size = 3;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "cfg->size");
    c = base_config(), c.num_experts = 0;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "num_experts");
    c = base_config(), c.in_features = 0;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "in_features");
    c = base_config(), c.out_features = -2;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "out_features");
    c = base_config(), c.param_dtype = GLN_DTYPE_FP8_E4M3;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "param_dtype");
    c = base_config(), c.activation_dtype = GLN_DTYPE_INT32;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "activation_dtype");
    c = base_config(), c.recipe = (gln_recipe_t)9;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "recipe");
    c = base_config(), c.fp8_format = (gln_fp8_format_t)3;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "fp8_format");
    c = base_config(), c.path = (gln_path_t)5;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "path");
    c = base_config(), c.recipe = GLN_RECIPE_FP8_DELAYED, c.amax_history_len = 0;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "amax_history_len");
    c = base_config(), c.recipe = GLN_RECIPE_FP8_DELAYED, c.amax_algo = (gln_amax_algo_t)4;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "amax_algo");
    c = base_config(), c.amax_epsilon = -1.0f;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "amax_epsilon");
    c = base_config(), c.e8m0_rounding = (gln_e8m0_rounding_t)7;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "e8m0_rounding");
    c = base_config(), c.always_roll = 2;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "gln_grouped_linear_create: cfg->always_roll 2 must be 0");
    c = base_config(), c.amax_nan_propagate = -1;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT,
                  "gln_grouped_linear_create: cfg->amax_nan_propagate -1 must be 0");
    /* known versions only: the first one (up to params) and the current one */
    c = base_config(), c.size = offsetof(gln_grouped_linear_config_t, always_roll) + 3;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "not a known version");
    c = base_config(), c.size = sizeof c + 8;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "not a known version");
    /* the first version: the bytes past it are not read (invalid values there are ignored) */
    c = base_config(), c.size = offsetof(gln_grouped_linear_config_t, always_roll);
    c.always_roll = 7, c.amax_nan_propagate = 7;
    L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    if (L) CHECK_OK(gln_grouped_linear_destroy(L));
    c = base_config(), c.init_std = -0.1f;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "init_std");
    c = base_config(), c.recipe = GLN_RECIPE_FP8_DELAYED, c.save_original_input = 1;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "save_original_input");
    c = base_config(), c.bias = 0, c.single_grouped_bias = 1;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "single_grouped_bias");

    /* caller parameters */
    float wbuf[N * KOUT * KIN], bbuf[N * KOUT], mg[N * KOUT * KIN];
    void *wl[N] = {wbuf, wbuf + KOUT * KIN, wbuf + 2 * KOUT * KIN};
    void *wl_null[N] = {wbuf, NULL, wbuf};
    void *bl[N] = {bbuf, bbuf + KOUT, bbuf + 2 * KOUT};
    c = base_config(), c.param_dtype = GLN_DTYPE_FP32;
    c.params.weights = wl, c.params.weight_packed = wbuf, c.params.bias_packed = bbuf;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "weight_packed");
    c = base_config(), c.params.weights = wl_null, c.params.biases = bl;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "params.weights[1]");
    c = base_config(), c.params.weight_packed = wbuf; /* bias = 1 but no biases */
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "biases");
    c = base_config(), c.bias = 0, c.params.weight_packed = wbuf, c.params.bias_packed = bbuf;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "bias = 0");
    c = base_config(), c.params.bias_packed = bbuf; /* owned weights, caller biases */
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "biases");
    c = base_config(), c.bias = 0, c.params.weight_packed = wbuf, c.fuse_wgrad_accumulation = 1;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "main_grads");
    c = base_config(), c.params.main_grad_packed = mg; /* main_grad without fusion */
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "fuse_wgrad_accumulation");

    /* single_grouped_weight / single_grouped_bias: set, the packed pointer is required; unset,
     * it is refused */
    c = base_config(), c.single_grouped_weight = 1; /* layer-owned weights */
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "single_grouped_weight = 1 requires cfg->params.weight_packed");
    c = base_config(), c.single_grouped_weight = 1, c.params.weights = wl, c.params.biases = bl;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "single_grouped_weight = 1 requires cfg->params.weight_packed");
    c = base_config(), c.params.weight_packed = wbuf, c.params.biases = bl;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "weight_packed requires cfg->single_grouped_weight = 1");
    c = base_config(), c.single_grouped_weight = 1, c.params.weight_packed = wbuf;
    c.single_grouped_bias = 1, c.params.biases = bl;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "single_grouped_bias = 1 requires cfg->params.bias_packed");
    c = base_config(), c.single_grouped_weight = 1, c.params.weight_packed = wbuf, c.params.bias_packed = bbuf;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "bias_packed requires cfg->single_grouped_bias = 1");
    c = base_config(), c.params.weights = wl, c.params.bias_packed = bbuf;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "bias_packed requires cfg->single_grouped_bias = 1");

    /* distributed weights */
    gln_dist_weights_t d = fake_dist();
    c = base_config(), c.params.distributed = &d, c.delay_wgrad_compute = 1;
    expect_create(&c, GLN_STATUS_NOT_SUPPORTED, "delay_wgrad_compute cannot be combined with distributed");
    c = base_config(), c.params.distributed = &d, c.single_grouped_weight = 1;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "single_grouped_weight = 1 cannot be combined");
    c = base_config(), c.params.distributed = &d, c.params.weight_packed = wbuf;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "distributed");
    c = base_config(), c.params.distributed = &d, c.fuse_wgrad_accumulation = 1, c.params.main_grad_packed = mg;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "main_grad");
    gln_dist_weights_t d2 = fake_dist();
    d2.num_experts = N + 1;
    c = base_config(), c.params.distributed = &d2;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "experts");
    d2 = fake_dist(), d2.grad_buffer = NULL;
    expect_create(&c, GLN_STATUS_INVALID_ARGUMENT, "grad_buffer");
    CHECK(never_called == 0);
}

/* ------------------------------------------------------------------ forward / backward */

typedef struct fixture {
    gln_grouped_linear_t *L;
    uint16_t *x, *y, *dy, *dx, *y_before, *dx_before;
    int64_t splits[N];
    gln_tensor_t xt, yt, dyt, dxt;
    gln_grouped_linear_forward_args_t a;
    void *grads_before; /* wgrad + bgrad snapshot */
} fixture_t;

static void fx_init(fixture_t *f, gln_path_t path, int delay) {
    memset(f, 0, sizeof *f);
    gln_grouped_linear_config_t c = base_config();
    c.path = path;
    c.delay_wgrad_compute = delay;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &f->L));
    f->x = gln_test_alloc(ROWS * KIN * 2);
    f->y = gln_test_alloc(ROWS * KOUT * 2);
    f->dy = gln_test_alloc(ROWS * KOUT * 2);
    f->dx = gln_test_alloc(ROWS * KIN * 2);
    f->y_before = gln_test_alloc(ROWS * KOUT * 2);
    f->dx_before = gln_test_alloc(ROWS * KIN * 2);
    f->grads_before = gln_test_alloc(N * (KOUT * KIN + KOUT) * 2);
    gln_rng_t r = gln_rng_seed(3);
    for (int i = 0; i < ROWS * KIN; i++) gln_store(f->x, GLN_DTYPE_BF16, (size_t)i, gln_rng_uniform(&r, -1, 1));
    for (int i = 0; i < ROWS * KOUT; i++) gln_store(f->dy, GLN_DTYPE_BF16, (size_t)i, gln_rng_uniform(&r, -1, 1));
    gln_poison(f->y, GLN_DTYPE_BF16, ROWS * KOUT);
    gln_poison(f->dx, GLN_DTYPE_BF16, ROWS * KIN);
    memcpy(f->y_before, f->y, ROWS * KOUT * 2);
    memcpy(f->dx_before, f->dx, ROWS * KIN * 2);
    f->splits[0] = 4, f->splits[1] = 0, f->splits[2] = 6;
    f->xt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, f->x);
    f->yt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, f->y);
    f->dyt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, f->dy);
    f->dxt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, f->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    f->a = a;
    f->a.x = &f->xt;
    f->a.m_splits = f->splits;
    f->a.y = &f->yt;
}

static void snapshot_grads(fixture_t *f, void *dst) {
    char *p = dst;
    for (int32_t i = 0; i < N; i++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(f->L, i, &wg, &bg));
        memcpy(p, wg, KOUT * KIN * 2), p += KOUT * KIN * 2;
        memcpy(p, bg, KOUT * 2), p += KOUT * 2;
    }
}

/* Nothing was written: y, dx and the gradient buffers are as before. */
static void check_untouched(fixture_t *f, const char *what) {
    CHECK_MSG(memcmp(f->y, f->y_before, ROWS * KOUT * 2) == 0, "%s wrote y", what);
    CHECK_MSG(memcmp(f->dx, f->dx_before, ROWS * KIN * 2) == 0, "%s wrote dx", what);
    void *now = gln_test_alloc(N * (KOUT * KIN + KOUT) * 2);
    snapshot_grads(f, now);
    CHECK_MSG(memcmp(now, f->grads_before, N * (KOUT * KIN + KOUT) * 2) == 0, "%s wrote gradients", what);
    gln_test_free(now);
    CHECK(gln_guard_ok(f->y) && gln_guard_ok(f->dx));
}

static void fx_free(fixture_t *f) {
    CHECK_OK(gln_grouped_linear_destroy(f->L));
    gln_test_free(f->x), gln_test_free(f->y), gln_test_free(f->dy), gln_test_free(f->dx);
    gln_test_free(f->y_before), gln_test_free(f->dx_before), gln_test_free(f->grads_before);
}

/* Forward with a modified copy of the args must fail and write nothing. */
static void expect_forward(fixture_t *f, const gln_grouped_linear_forward_args_t *a, gln_status_t status,
                           const char *needle) {
    gln_grouped_linear_saved_t *sv = (gln_grouped_linear_saved_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_forward(f->L, a, &sv), status, needle);
    CHECK_MSG(sv == (gln_grouped_linear_saved_t *)(uintptr_t)1 || sv == NULL, "saved set on failure");
    CHECK(strstr(gln_last_error(), "gln_grouped_linear_forward") != NULL);
    check_untouched(f, needle);
}

static void test_forward_errors(void) {
    for (int p = 0; p < 2; p++) {
        fixture_t f;
        fx_init(&f, (gln_path_t)p, 0);
        snapshot_grads(&f, f.grads_before);
        gln_grouped_linear_forward_args_t a;
        gln_tensor_t t;
        int64_t sp[N];

        CHECK_STATUS(gln_grouped_linear_forward(NULL, &f.a, NULL), GLN_STATUS_INVALID_ARGUMENT, "layer");
        CHECK_STATUS(gln_grouped_linear_forward(f.L, NULL, NULL), GLN_STATUS_INVALID_ARGUMENT, "args");
        a = f.a, a.size = 0;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->size");
        a = f.a, a.x = NULL;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "x");
        a = f.a, a.m_splits = NULL;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "m_splits");
        a = f.a, a.y = NULL;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "y");
        t = f.xt, t.dtype = GLN_DTYPE_FP16, a = f.a, a.x = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x->dtype");
        t = f.xt, t.cols = KIN - 1, a = f.a, a.x = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x->cols");
        t = f.xt, t.scaling = GLN_SCALING_TENSOR, t.dtype = GLN_DTYPE_FP8_E4M3, a = f.a, a.x = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "high-precision");
        t = f.xt, t.data = NULL, a = f.a, a.x = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x->data");
        t = f.yt, t.rows = ROWS - 1, a = f.a, a.y = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->y->rows");
        t = f.yt, t.cols = KOUT + 1, a = f.a, a.y = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->y->cols");
        t = f.yt, t.dtype = GLN_DTYPE_FP32, a = f.a, a.y = &t;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "args->y->dtype");
        a = f.a, a.microbatch = (gln_microbatch_t)3;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "microbatch");
        memcpy(sp, f.splits, sizeof sp), sp[1] = -1, sp[2] = 7, a = f.a, a.m_splits = sp;
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "m_splits[1]");
        memcpy(sp, f.splits, sizeof sp), sp[2] = 7, a = f.a, a.m_splits = sp; /* Σ = 11 > 10 */
        expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "sum 11");
        if (p == GLN_PATH_SPLIT) {
            memcpy(sp, f.splits, sizeof sp), sp[2] = 5, a = f.a, a.m_splits = sp; /* Σ = 9 < 10 */
            expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "must equal x->rows");
            a = f.a, a.splits_on_backend = 1;
            expect_forward(&f, &a, GLN_STATUS_INVALID_ARGUMENT, "splits_on_backend");
        }
        fx_free(&f);
    }
}

static void test_backward_errors(void) {
    fixture_t f;
    fx_init(&f, GLN_PATH_SPLIT, 0);
    gln_grouped_linear_saved_t *sv = NULL, *sv_nograd = NULL;
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &sv));
    gln_grouped_linear_forward_args_t a = f.a;
    a.input_requires_grad = 0;
    CHECK_OK(gln_grouped_linear_forward(f.L, &a, &sv_nograd));
    memcpy(f.y_before, f.y, ROWS * KOUT * 2); /* y was legitimately written */
    snapshot_grads(&f, f.grads_before);
    gln_tensor_t t;

    CHECK_STATUS(gln_grouped_linear_backward(NULL, &f.dyt, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "saved");
    CHECK_STATUS(gln_grouped_linear_backward(sv, NULL, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "dy");
    t = f.dyt, t.rows = ROWS + 1;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &t, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "dy->rows");
    t = f.dyt, t.cols = KOUT - 1;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &t, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "dy->cols");
    t = f.dyt, t.dtype = GLN_DTYPE_FP32;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &t, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "dy->dtype");
    t = f.dyt, t.data = NULL;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &t, &f.dxt), GLN_STATUS_INVALID_ARGUMENT, "dy->data");
    t = f.dxt, t.cols = KIN + 3;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &f.dyt, &t), GLN_STATUS_INVALID_ARGUMENT, "dx->cols");
    t = f.dxt, t.dtype = GLN_DTYPE_FP16;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &f.dyt, &t), GLN_STATUS_INVALID_ARGUMENT, "dx->dtype");
    t = f.dxt, t.rows = 2;
    CHECK_STATUS(gln_grouped_linear_backward(sv, &f.dyt, &t), GLN_STATUS_INVALID_ARGUMENT, "dx->rows");
    CHECK_STATUS(gln_grouped_linear_backward(sv_nograd, &f.dyt, &f.dxt), GLN_STATUS_INVALID_ARGUMENT,
                 "input_requires_grad");
    CHECK(strstr(gln_last_error(), "gln_grouped_linear_backward") != NULL);
    check_untouched(&f, "rejected backward");

    /* the rejected calls left the context usable; a second backward is an invalid state and
     * writes nothing */
    CHECK_OK(gln_grouped_linear_backward(sv, &f.dyt, &f.dxt));
    memcpy(f.dx_before, f.dx, ROWS * KIN * 2);
    snapshot_grads(&f, f.grads_before);
    gln_poison(f.dx, GLN_DTYPE_BF16, ROWS * KIN);
    memcpy(f.dx_before, f.dx, ROWS * KIN * 2);
    CHECK_STATUS(gln_grouped_linear_backward(sv, &f.dyt, &f.dxt), GLN_STATUS_INVALID_STATE, "already");
    check_untouched(&f, "second backward");

    /* destroy with live saved contexts is refused, after release it works */
    CHECK_STATUS(gln_grouped_linear_destroy(f.L), GLN_STATUS_INVALID_STATE, "saved");
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_saved_release(sv_nograd));
    CHECK_OK(gln_grouped_linear_saved_release(NULL));
    fx_free(&f);
}

static void test_misc_errors(void) {
    fixture_t f;
    fx_init(&f, GLN_PATH_GROUPED, 0);
    void *w = NULL;
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.L), GLN_STATUS_INVALID_STATE, "queue is empty");
    CHECK_STATUS(gln_grouped_linear_backward_dw(NULL), GLN_STATUS_INVALID_ARGUMENT, "layer");
    CHECK_STATUS(gln_grouped_linear_weight(f.L, N, &w, NULL), GLN_STATUS_INVALID_ARGUMENT, "expert 3");
    CHECK_STATUS(gln_grouped_linear_grads(f.L, -1, &w, NULL), GLN_STATUS_INVALID_ARGUMENT, "expert -1");
    float *scale = NULL;
    CHECK_STATUS(gln_grouped_linear_fp8_state(f.L, 0, &scale, NULL, NULL, NULL), GLN_STATUS_NOT_SUPPORTED,
                 "fp8_delayed");
    CHECK_STATUS(gln_grouped_linear_weights_updated(NULL), GLN_STATUS_INVALID_ARGUMENT, "layer");
    CHECK_STATUS(gln_grouped_linear_zero_grad(NULL), GLN_STATUS_INVALID_ARGUMENT, "layer");
    CHECK_OK(gln_grouped_linear_destroy(NULL));
    fx_free(&f);

    /* delayed wgrad: one item per backward, then the queue is empty again */
    fx_init(&f, GLN_PATH_SPLIT, 1);
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &sv));
    CHECK_OK(gln_grouped_linear_backward(sv, &f.dyt, &f.dxt));
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_backward_dw(f.L));
    CHECK_STATUS(gln_grouped_linear_backward_dw(f.L), GLN_STATUS_INVALID_STATE, "empty");
    fx_free(&f);

    CHECK(strcmp(gln_recipe_name(GLN_RECIPE_MXFP8), "mxfp8") == 0);
    CHECK(strcmp(gln_recipe_name((gln_recipe_t)42), "invalid") == 0);
    CHECK(gln_recipe_alignment(GLN_RECIPE_MXFP8) == 32);
    CHECK(gln_recipe_alignment(GLN_RECIPE_NONE) == 1);
    CHECK(gln_recipe_alignment((gln_recipe_t)42) == 0);
}

static void setup_ctx(void) { CHECK_OK(gln_context_create(NULL, &ctx)); }
static void teardown_ctx(void) { gln_context_destroy(ctx); }

GLN_TEST_MAIN(GLN_CASE(setup_ctx), GLN_CASE(test_create_errors), GLN_CASE(test_forward_errors),
              GLN_CASE(test_backward_errors), GLN_CASE(test_misc_errors), GLN_CASE(teardown_ctx))
