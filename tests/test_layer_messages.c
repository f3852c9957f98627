/* Messages of the layer calls: a failure inside gln_grouped_linear_forward /
 * backward / backward_dw is reported under the public call, the step it was in and the
 * argument, never only under an internal call ("gln_gemm: ...", "cpu gemm: ..."); a failing
 * caller-written gln_dist_weights_t hook leaves a message naming the hook (and the expert),
 * never an empty or stale one; a failed forward sets *saved to NULL first. */
#include <stdint.h>
#include <string.h>

#include "harness.h"

enum { N = 2, KOUT = 4, KIN = 8, ROWS = 6 };

static gln_context_t *ctx;
static void setup(void) { ctx = gln_test_cpu_context(); }

/* last error contains `needle` */
#define CHECK_MESSAGE(needle)                                                                   \
    CHECK_MSG(strstr(gln_last_error(), (needle)) != NULL, "message '%s' does not contain '%s'",  \
              gln_last_error(), (needle))

/* ---- a caller-written distributed group whose hooks fail on demand ------------------------- */

typedef enum fault {
    FAULT_NONE,
    FAULT_MATERIALIZE_SILENT,   /* returns an error, records nothing */
    FAULT_MATERIALIZE_LIBRARY,  /* fails inside a library call it makes */
    FAULT_MATERIALIZE_DTYPE,    /* "succeeds" with int32 weights */
    FAULT_RELEASE,
    FAULT_GRAD_BUFFER_1,        /* grad_buffer fails for expert 1 */
    FAULT_FINALIZE,
    FAULT_WAIT                  /* finalize reports pending, then wait fails */
} fault_t;

static fault_t fault;
static float w_full[N][KOUT * KIN], grads[N][KOUT * KIN];

static int h_requires_grad(void *impl) { (void)impl; return 1; }

static gln_status_t h_materialize(void *impl, gln_tensor_t *w) {
    (void)impl;
    if (fault == FAULT_MATERIALIZE_SILENT) return GLN_STATUS_INVALID_STATE;
    if (fault == FAULT_MATERIALIZE_LIBRARY) {
        gln_tensor_t a = gln_tensor_make(GLN_DTYPE_FP32, 1, 1, w_full[0]);
        return gln_cast(ctx, &a, NULL); /* gln_cast: out must not be NULL */
    }
    for (int i = 0; i < N; i++) {
        w[i] = gln_tensor_make(GLN_DTYPE_FP32, KOUT, KIN, w_full[i]);
        if (fault == FAULT_MATERIALIZE_DTYPE) w[i].dtype = GLN_DTYPE_INT32;
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t h_release(void *impl, gln_tensor_t *w) {
    (void)impl, (void)w;
    return fault == FAULT_RELEASE ? GLN_STATUS_COMM_ERROR : GLN_STATUS_SUCCESS;
}

static gln_status_t h_grad_buffer(void *impl, int32_t e, float **buf) {
    (void)impl;
    if (fault == FAULT_GRAD_BUFFER_1 && e == 1) return GLN_STATUS_INVALID_STATE;
    *buf = grads[e];
    return GLN_STATUS_SUCCESS;
}

static gln_status_t h_finalize(void *impl, int accumulate, int *pending) {
    (void)impl, (void)accumulate;
    *pending = fault == FAULT_WAIT;
    return fault == FAULT_FINALIZE ? GLN_STATUS_COMM_ERROR : GLN_STATUS_SUCCESS;
}

static gln_status_t h_wait(void *impl) {
    (void)impl;
    return fault == FAULT_WAIT ? GLN_STATUS_COMM_ERROR : GLN_STATUS_SUCCESS;
}

static const gln_dist_weights_t k_dist = {sizeof(gln_dist_weights_t), NULL, N, KOUT, KIN,
                                          h_requires_grad, h_materialize, h_materialize, h_release,
                                          h_grad_buffer, h_finalize, h_wait, NULL};

/* ---- a small layer and its data ------------------------------------------------------------ */

typedef struct fixture {
    gln_grouped_linear_t *L;
    uint16_t x[ROWS * KIN], y[ROWS * KOUT], dy[ROWS * KOUT], dx[ROWS * KIN];
    int64_t splits[N];
    gln_tensor_t xt, yt, dyt, dxt;
    gln_grouped_linear_forward_args_t a;
} fixture_t;

static void fx_init(fixture_t *f, const gln_dist_weights_t *dist) {
    memset(f, 0, sizeof *f);
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = N, c.in_features = KIN, c.out_features = KOUT, c.bias = 0;
    c.params.distributed = dist;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &f->L));
    f->splits[0] = 2, f->splits[1] = ROWS - 2;
    f->xt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, f->x);
    f->yt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, f->y);
    f->dyt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KOUT, f->dy);
    f->dxt = gln_tensor_make(GLN_DTYPE_BF16, ROWS, KIN, f->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &f->xt, a.m_splits = f->splits, a.y = &f->yt;
    f->a = a;
}

/* A forward that must fail with `status`: *saved comes back NULL and nothing stays alive. */
static void expect_forward(fixture_t *f, gln_status_t status, const char *needle) {
    gln_grouped_linear_saved_t *saved = (gln_grouped_linear_saved_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_forward(f->L, &f->a, &saved), status, needle);
    CHECK(saved == NULL);
}

/* ---- cases --------------------------------------------------------------------------------- */

static void test_saved_null_on_failure(void) {
    fixture_t f;
    fx_init(&f, NULL);
    gln_tensor_t bad = f.xt;
    bad.cols = KIN + 1;
    f.a.x = &bad; /* refused at the boundary */
    expect_forward(&f, GLN_STATUS_INVALID_ARGUMENT, "gln_grouped_linear_forward: args->x->cols");
    gln_grouped_linear_saved_t *saved = (gln_grouped_linear_saved_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_forward(NULL, &f.a, &saved), GLN_STATUS_INVALID_ARGUMENT, "layer");
    CHECK(saved == NULL);
    saved = (gln_grouped_linear_saved_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_forward(f.L, NULL, &saved), GLN_STATUS_INVALID_ARGUMENT, "args");
    CHECK(saved == NULL);
    CHECK_OK(gln_grouped_linear_destroy(f.L)); /* no saved context left alive */
}

/* The CPU's BLAS takes int dimensions: checked at the boundary, named after the argument (it used
 * to fail inside the forward as "cpu gemm: dimensions m ... exceed the BLAS int range"). */
static void test_backend_gemm_limit(void) {
    const int64_t big = (int64_t)INT32_MAX + 1;
    static uint16_t one[4];
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = 1, c.in_features = 1, c.out_features = 1, c.bias = 0;
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    gln_tensor_t x = gln_tensor_make(GLN_DTYPE_BF16, big, 1, one), y = x;
    int64_t splits[1] = {big};
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &x, a.m_splits = splits, a.y = &y;
    CHECK_STATUS(gln_grouped_linear_forward(L, &a, NULL), GLN_STATUS_NOT_SUPPORTED,
                 "gln_grouped_linear_forward: args->m_splits[0] 2147483648 exceeds the cpu backend's GEMM "
                 "dimension limit (2147483647)");
    gln_grouped_linear_destroy(L);

    gln_grouped_linear_t *L2 = (gln_grouped_linear_t *)(uintptr_t)1;
    c.in_features = big;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &c, &L2), GLN_STATUS_NOT_SUPPORTED,
                 "gln_grouped_linear_create: cfg->in_features 2147483648 exceeds the cpu backend's GEMM");
    CHECK(L2 == NULL);

    float f1[1] = {1};
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, 1, 1, f1);
    gln_tensor_t B = gln_tensor_make(GLN_DTYPE_FP32, big, 1, f1), D = B;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0), GLN_STATUS_NOT_SUPPORTED,
                 "gln_gemm: m (D->rows) 2147483648 exceeds the cpu backend's GEMM dimension limit");
    gln_grouped_tensor_t gb = {1, splits, 0, B}, gd = {1, splits, 0, D};
    gln_grouped_gemm_args_t ga = GLN_GROUPED_GEMM_ARGS_INIT;
    ga.a_list = &A, ga.b = &gb, ga.d_grouped = &gd;
    CHECK_STATUS(gln_grouped_gemm(ctx, &ga), GLN_STATUS_NOT_SUPPORTED,
                 "gln_grouped_gemm: args->b->splits[0] 2147483648 exceeds the cpu backend's GEMM");
}

static void test_forward_hook_failures(void) {
    fixture_t f;
    fx_init(&f, &k_dist);

    /* a hook that fails silently after an unrelated failure: the old message is not its own */
    fault = FAULT_MATERIALIZE_SILENT;
    CHECK_STATUS(gln_cast(ctx, NULL, NULL), GLN_STATUS_INVALID_ARGUMENT, "gln_cast");
    expect_forward(&f, GLN_STATUS_INVALID_STATE,
                   "gln_grouped_linear_forward: materializing the weights: cfg->params.distributed->"
                   "materialize_forward failed (invalid state): the hook left no message");
    CHECK(strstr(gln_last_error(), "gln_cast") == NULL);

    /* a hook failing inside a library call: that detail is kept */
    fault = FAULT_MATERIALIZE_LIBRARY;
    expect_forward(&f, GLN_STATUS_INVALID_ARGUMENT,
                   "gln_grouped_linear_forward: materializing the weights: cfg->params.distributed->"
                   "materialize_forward failed (invalid argument): gln_cast: out must not be NULL");

    /* weights the layer cannot use: named under the forward, not under gln_cast / gln_gemm */
    fault = FAULT_MATERIALIZE_DTYPE;
    expect_forward(&f, GLN_STATUS_INVALID_ARGUMENT,
                   "gln_grouped_linear_forward: materializing the weights: cfg->params.distributed->"
                   "materialize_forward returned weight 0 of dtype int32");

    fault = FAULT_RELEASE;
    expect_forward(&f, GLN_STATUS_COMM_ERROR,
                   "gln_grouped_linear_forward: releasing the weights: cfg->params.distributed->release "
                   "failed (communication error)");

    fault = FAULT_NONE;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &saved));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    CHECK_OK(gln_grouped_linear_destroy(f.L));
}

static void test_backward_hook_failures(void) {
    fixture_t f;
    fx_init(&f, &k_dist);
    gln_grouped_linear_saved_t *saved = NULL;

    fault = FAULT_NONE;
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &saved));
    fault = FAULT_GRAD_BUFFER_1;
    CHECK_STATUS(gln_grouped_linear_backward(saved, &f.dyt, &f.dxt), GLN_STATUS_INVALID_STATE,
                 "gln_grouped_linear_backward: looking up the wgrad outputs: cfg->params.distributed->"
                 "grad_buffer for expert 1 failed (invalid state): the hook left no message");
    /* refused before anything was written: the same context can run again */
    fault = FAULT_FINALIZE;
    CHECK_STATUS(gln_grouped_linear_backward(saved, &f.dyt, &f.dxt), GLN_STATUS_COMM_ERROR,
                 "gln_grouped_linear_backward: wgrad: cfg->params.distributed->finalize_grads failed "
                 "(communication error): the hook left no message");
    CHECK_OK(gln_grouped_linear_saved_release(saved));

    /* finalize reports pending; the next backward completes it with wait(), which fails */
    fault = FAULT_WAIT;
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &saved));
    CHECK_OK(gln_grouped_linear_backward(saved, &f.dyt, &f.dxt));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    CHECK_OK(gln_grouped_linear_forward(f.L, &f.a, &saved));
    CHECK_STATUS(gln_grouped_linear_backward(saved, &f.dyt, &f.dxt), GLN_STATUS_COMM_ERROR,
                 "gln_grouped_linear_backward: completing the previous finalize_grads: "
                 "cfg->params.distributed->wait failed (communication error)");
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    fault = FAULT_NONE;
    CHECK_OK(gln_grouped_linear_destroy(f.L));
}

/* A layer call's message starts with the layer call even when an internal call failed. */
static void test_step_prefix(void) {
    fixture_t f;
    fx_init(&f, &k_dist);
    fault = FAULT_MATERIALIZE_LIBRARY;
    expect_forward(&f, GLN_STATUS_INVALID_ARGUMENT, NULL);
    CHECK(strncmp(gln_last_error(), "gln_grouped_linear_forward: ", 28) == 0);
    CHECK(strstr(gln_last_error(), "gln_grouped_linear_forward: gln_grouped_linear_forward") == NULL);
    fault = FAULT_NONE;
    CHECK_OK(gln_grouped_linear_destroy(f.L));
}

GLN_TEST_MAIN(GLN_CASE(setup), GLN_CASE(test_saved_null_on_failure), GLN_CASE(test_backend_gemm_limit),
              GLN_CASE(test_forward_hook_failures), GLN_CASE(test_backward_hook_failures),
              GLN_CASE(test_step_prefix))
