/* gln_grouped_linear_forward with args->x_quantized AND an args->x: x is not read, but the
 * header makes its rows the call's rows (that the splits count), so an x whose row count
 * disagrees with x_quantized (and so with the splits) is refused with INVALID_ARGUMENT naming
 * args->x->rows, on both paths; an x that agrees, or none, is taken. */
#include <string.h>

#include "harness.h"

#define N 2
#define KIN 32
#define KOUT 16
#define ROWS 9
#define DT GLN_DTYPE_BF16
static const int64_t SPLITS[N] = {4, 5};

typedef struct fixture {
    gln_grouped_linear_t *layer;
    void *x, *y, *data, *col, *s, *cs, *aux;
    gln_tensor_t yt;
    gln_grouped_tensor_t q;
} fixture_t;

static int setup(fixture_t *f, gln_path_t path) {
    memset(f, 0, sizeof *f);
    gln_context_t *ctx = gln_test_cpu_context();
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = N;
    c.in_features = KIN;
    c.out_features = KOUT;
    c.recipe = GLN_RECIPE_FP8_CURRENT;
    c.path = path;
    c.seed = 3;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &f->layer));
    if (!f->layer) return 0;
    f->x = gln_test_alloc(ROWS * KIN * gln_dtype_size(DT));
    f->y = gln_test_alloc(ROWS * KOUT * gln_dtype_size(DT));
    gln_rng_t r = gln_rng_seed(11);
    for (size_t i = 0; i < ROWS * KIN; i++) gln_store(f->x, DT, i, gln_rng_normal(&r));
    f->yt = gln_tensor_make(DT, ROWS, KOUT, f->y);

    gln_quant_config_t qc = GLN_QUANT_CONFIG_INIT;
    CHECK_OK(gln_grouped_linear_input_quant_config(f->layer, 1, &qc));
    CHECK(qc.mode == GLN_SCALING_TENSOR);
    f->q.num = N;
    f->q.splits = SPLITS;
    f->q.packed = gln_tensor_make(qc.fp8_dtype, ROWS, KIN, NULL);
    f->q.packed.scaling = qc.mode;
    f->q.packed.data = f->data = gln_test_alloc(ROWS * KIN);
    f->q.packed.col_data = f->col = gln_test_alloc(ROWS * KIN);
    f->q.packed.scale_inv = f->s = gln_test_alloc(N * sizeof(float));
    f->q.packed.col_scale_inv = f->cs = gln_test_alloc(N * sizeof(float));
    f->aux = gln_test_alloc(2 * N * sizeof(float));
    f->q.packed.scale = f->aux;
    f->q.packed.amax = (float *)f->aux + N;
    gln_grouped_tensor_t in = {N, SPLITS, 0, gln_tensor_make(DT, ROWS, KIN, f->x)};
    CHECK_OK(gln_grouped_quantize(ctx, &qc, &in, &f->q));
    return 1;
}

static void teardown(fixture_t *f) {
    void *bufs[] = {f->x, f->y, f->data, f->col, f->s, f->cs, f->aux};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) {
            CHECK(gln_guard_ok(bufs[i]));
            gln_test_free(bufs[i]);
        }
    if (f->layer) CHECK_OK(gln_grouped_linear_destroy(f->layer));
}

static gln_status_t forward(fixture_t *f, const gln_tensor_t *x) {
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = x;
    a.x_quantized = &f->q;
    a.m_splits = SPLITS;
    a.y = &f->yt;
    gln_grouped_linear_saved_t *saved = (gln_grouped_linear_saved_t *)&saved; /* poisoned */
    gln_status_t st = gln_grouped_linear_forward(f->layer, &a, &saved);
    if (st == GLN_STATUS_SUCCESS)
        CHECK_OK(gln_grouped_linear_saved_release(saved));
    else
        CHECK(saved == NULL);
    return st;
}

static void run(gln_path_t path) {
    fixture_t f;
    if (!setup(&f, path)) return teardown(&f);
    CHECK_OK(forward(&f, NULL));
    gln_tensor_t same = gln_tensor_make(DT, ROWS, KIN, f.x);
    CHECK_OK(forward(&f, &same));
    /* more rows than the splits count (and than x_quantized holds) */
    gln_tensor_t more = gln_tensor_make(DT, ROWS + 3, KIN, f.x);
    CHECK_STATUS(forward(&f, &more), GLN_STATUS_INVALID_ARGUMENT, "args->x->rows 12");
    /* fewer rows: the splits would count past x's end */
    gln_tensor_t fewer = gln_tensor_make(DT, 4, KIN, f.x);
    CHECK_STATUS(forward(&f, &fewer), GLN_STATUS_INVALID_ARGUMENT, "args->x->rows 4");
    gln_tensor_t none = gln_tensor_make(DT, 0, KIN, NULL);
    CHECK_STATUS(forward(&f, &none), GLN_STATUS_INVALID_ARGUMENT, "args->x->rows 0");
    teardown(&f);
}

static void test_split_path(void) { run(GLN_PATH_SPLIT); }
static void test_grouped_path(void) { run(GLN_PATH_GROUPED); }

GLN_TEST_MAIN(GLN_CASE(test_split_path), GLN_CASE(test_grouped_path))
