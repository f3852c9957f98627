/* A grouped linear layer fed an input that is already quantized (args->x_quantized).
 *
 * For the current-scaling, MXFP8 and block-scaling recipes, on both paths (the grouped one with
 * host and backend splits), with and without bias and fused main_grad: forward + backward with
 * x_quantized = gln_grouped_quantize(x, gln_grouped_linear_input_quant_config(layer)) gives y,
 * dx, the weight gradients and the bias gradients BITWISE equal to passing x (two layers with
 * the same seed, so the same owned weights).  Then every refusal, with its status and a message
 * naming the argument, and the inference forward that needs no columnwise copy. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 3
#define KIN 72 /* not a multiple of 32 or 128: partial MXFP8 / block-scaling blocks */
#define KOUT 24
#define WS (KOUT * KIN)
#define DT GLN_DTYPE_BF16
static const int64_t SPLITS[N] = {7, 0, 12};
#define SUM 19

/* ---------------------------------------------------------------- quantized grouped buffers */

typedef struct qbuf {
    gln_grouped_tensor_t g;
    void *data, *col, *s, *cs;
    float *aux;
} qbuf_t;

/* Buffers for gln_grouped_quantize(cfg) of a [rows, KIN] input with these splits. */
static void qbuf_make(const gln_quant_config_t *c, int64_t rows, const int64_t *splits, int on_backend, qbuf_t *q) {
    memset(q, 0, sizeof *q);
    q->g.num = N;
    q->g.splits = splits;
    q->g.splits_on_backend = on_backend;
    int64_t re = N, ce = N;
    if (c->mode != GLN_SCALING_TENSOR) {
        if (on_backend) {
            CHECK_OK(gln_grouped_scale_bound(c->mode, N, rows, KIN, &re, &ce));
        } else {
            int64_t ro[N + 1], co[N + 1];
            CHECK_OK(gln_grouped_scale_offsets(c->mode, N, splits, KIN, ro, co));
            re = ro[N], ce = co[N];
        }
    }
    size_t es = c->mode == GLN_SCALING_MXFP8_1D ? 1 : sizeof(float), bytes = (size_t)(rows * KIN);
    gln_tensor_t *p = &q->g.packed;
    *p = gln_tensor_make(c->fp8_dtype, rows, KIN, NULL);
    p->scaling = c->mode;
    if (c->rowwise) {
        p->data = q->data = gln_test_alloc(bytes + 1);
        p->scale_inv = q->s = gln_test_alloc((size_t)re * es + 1);
    }
    if (c->columnwise) {
        p->col_data = q->col = gln_test_alloc(bytes + 1);
        p->col_scale_inv = q->cs = gln_test_alloc((size_t)ce * es + 1);
    }
    if (c->mode == GLN_SCALING_TENSOR) {
        q->aux = gln_test_alloc(2 * N * sizeof(float));
        p->scale = q->aux;
        p->amax = q->aux + N;
    }
}

static void qbuf_free(qbuf_t *q) {
    void *bufs[5] = {q->data, q->col, q->s, q->cs, q->aux};
    for (int i = 0; i < 5; i++) {
        if (!bufs[i]) continue;
        CHECK_MSG(gln_guard_ok(bufs[i]), "guard after quantized input buffer %d overwritten", i);
        gln_test_free(bufs[i]);
    }
    memset(q, 0, sizeof *q);
}

/* x_quantized of x [rows, KIN] with the layer's input config (columnwise as asked). */
static void quantize_input(gln_grouped_linear_t *layer, const void *x, int64_t rows, const int64_t *splits,
                           int on_backend, int columnwise, qbuf_t *q) {
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    CHECK_OK(gln_grouped_linear_input_quant_config(layer, columnwise, &c));
    qbuf_make(&c, rows, splits, on_backend, q);
    gln_grouped_tensor_t in = {N, splits, on_backend, gln_tensor_make(DT, rows, KIN, (void *)x)};
    CHECK_OK(gln_grouped_quantize(gln_test_cpu_context(), &c, &in, &q->g));
}

/* ---------------------------------------------------------------- layers */

typedef struct setup {
    gln_recipe_t recipe;
    gln_path_t path;
    int on_backend, bias, fuse, delay;
} setup_t;

static gln_grouped_linear_t *layer_make(const setup_t *su) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = N;
    c.in_features = KIN;
    c.out_features = KOUT;
    c.bias = su->bias;
    c.recipe = su->recipe;
    c.path = su->path;
    c.fuse_wgrad_accumulation = su->fuse;
    c.delay_wgrad_compute = su->delay;
    c.seed = 77; /* owned weights: the same for every layer of a case */
    c.init_std = 0.05f;
    gln_grouped_linear_t *layer = NULL;
    CHECK_OK(gln_grouped_linear_create(gln_test_cpu_context(), &c, &layer));
    return layer;
}

static void fill(void *buf, size_t count, double scale, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    for (size_t i = 0; i < count; i++) gln_store(buf, DT, i, scale * gln_rng_normal(&r));
}

/* One training step (forward + backward, then backward_dw when delayed) with x or x_quantized. */
static void step(gln_grouped_linear_t *layer, const setup_t *su, int64_t rows, const void *x,
                 const gln_grouped_tensor_t *xq, const void *dy, void *y, void *dx) {
    gln_tensor_t xt = gln_tensor_make(DT, rows, KIN, (void *)x), yt = gln_tensor_make(DT, rows, KOUT, y);
    gln_tensor_t dyt = gln_tensor_make(DT, rows, KOUT, (void *)dy), dxt = gln_tensor_make(DT, rows, KIN, dx);
    gln_poison(y, DT, (size_t)(rows * KOUT));
    gln_poison(dx, DT, (size_t)(rows * KIN));
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = xq ? NULL : &xt;
    a.x_quantized = xq;
    a.m_splits = SPLITS;
    a.splits_on_backend = su->on_backend;
    a.y = &yt;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(layer, &a, &saved));
    if (!saved) return;
    CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
    if (su->delay) CHECK_OK(gln_grouped_linear_backward_dw(layer));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
}

static void compare_grads(gln_grouped_linear_t *a, gln_grouped_linear_t *b, const setup_t *su, const char *what) {
    size_t wbytes = su->fuse ? WS * sizeof(float) : WS * gln_dtype_size(DT);
    for (int e = 0; e < N; e++) {
        void *wa = NULL, *ba = NULL, *wb = NULL, *bb = NULL, *pa = NULL, *pb = NULL;
        CHECK_OK(gln_grouped_linear_weight(a, e, &pa, NULL));
        CHECK_OK(gln_grouped_linear_weight(b, e, &pb, NULL));
        CHECK(gln_check_bitwise("owned weights of the two layers", pa, pb, WS * gln_dtype_size(DT)));
        CHECK_OK(gln_grouped_linear_grads(a, e, &wa, &ba));
        CHECK_OK(gln_grouped_linear_grads(b, e, &wb, &bb));
        CHECK_MSG(gln_check_bitwise("wgrad", wa, wb, wbytes), "%s: expert %d wgrad differs", what, e);
        if (su->bias)
            CHECK_MSG(gln_check_bitwise("bgrad", ba, bb, KOUT * gln_dtype_size(DT)), "%s: expert %d bgrad differs",
                      what, e);
    }
}

/* Two steps (gradients accumulate) through layer A with x and layer B with x_quantized. */
static void run_case(const setup_t *su) {
    char what[160];
    snprintf(what, sizeof what, "%s path=%d on_backend=%d bias=%d fuse=%d delay=%d", gln_recipe_name(su->recipe),
             (int)su->path, su->on_backend, su->bias, su->fuse, su->delay);
    int64_t rows = su->path == GLN_PATH_GROUPED ? SUM + 3 : SUM; /* grouped: trailing rows */
    gln_grouped_linear_t *la = layer_make(su), *lb = layer_make(su);
    size_t es = gln_dtype_size(DT);
    void *x = gln_test_alloc((size_t)rows * KIN * es), *dy = gln_test_alloc((size_t)rows * KOUT * es);
    void *y1 = gln_test_alloc((size_t)rows * KOUT * es), *y2 = gln_test_alloc((size_t)rows * KOUT * es);
    void *dx1 = gln_test_alloc((size_t)rows * KIN * es), *dx2 = gln_test_alloc((size_t)rows * KIN * es);
    for (int it = 0; la && lb && it < 2; it++) {
        fill(x, (size_t)rows * KIN, 1.0 + it, 100 + it);
        fill(dy, (size_t)rows * KOUT, 0.5, 200 + it);
        qbuf_t q;
        quantize_input(lb, x, rows, SPLITS, su->on_backend, 1, &q);
        step(la, su, rows, x, NULL, dy, y1, dx1);
        step(lb, su, rows, x, &q.g, dy, y2, dx2);
        CHECK_MSG(gln_check_bitwise("y", y1, y2, (size_t)rows * KOUT * es), "%s: step %d y differs", what, it);
        CHECK_MSG(gln_check_bitwise("dx", dx1, dx2, (size_t)rows * KIN * es), "%s: step %d dx differs", what, it);
        compare_grads(la, lb, su, what);
        qbuf_free(&q);
    }
    void *bufs[6] = {x, dy, y1, y2, dx1, dx2};
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(gln_guard_ok(bufs[i]), "%s: guard of buffer %d overwritten", what, i);
        gln_test_free(bufs[i]);
    }
    if (la) CHECK_OK(gln_grouped_linear_destroy(la));
    if (lb) CHECK_OK(gln_grouped_linear_destroy(lb));
}

static void test_bitwise_equal(void) {
    const gln_recipe_t recipes[3] = {GLN_RECIPE_FP8_CURRENT, GLN_RECIPE_MXFP8, GLN_RECIPE_FP8_BLOCK};
    for (int r = 0; r < 3; r++)
        for (int mode = 0; mode < 3; mode++) /* split; grouped host splits; grouped backend splits */
            for (int bias = 0; bias < 2; bias++)
                for (int fuse = 0; fuse < 2; fuse++) {
                    setup_t su = {recipes[r], mode ? GLN_PATH_GROUPED : GLN_PATH_SPLIT, mode == 2, bias, fuse, 0};
                    run_case(&su);
                }
}

/* The wgrad queued by delay_wgrad_compute reads the caller's columnwise copy at backward_dw. */
static void test_bitwise_equal_delayed_wgrad(void) {
    for (int path = 0; path < 2; path++) {
        setup_t su = {GLN_RECIPE_MXFP8, (gln_path_t)path, 0, 1, 1, 1};
        run_case(&su);
    }
}

/* ---------------------------------------------------------------- refusals */

typedef struct refusal_fix {
    setup_t su;
    gln_grouped_linear_t *layer;
    void *x, *y;
    gln_tensor_t yt;
    qbuf_t q;
    gln_grouped_linear_forward_args_t a;
} refusal_fix_t;

static int refusal_init(refusal_fix_t *f, gln_recipe_t recipe, int columnwise) {
    memset(f, 0, sizeof *f);
    f->su.recipe = recipe;
    f->su.path = GLN_PATH_SPLIT;
    f->layer = layer_make(&f->su);
    f->x = gln_test_alloc(SUM * KIN * gln_dtype_size(DT));
    f->y = gln_test_alloc(SUM * KOUT * gln_dtype_size(DT));
    fill(f->x, SUM * KIN, 1.0, 5);
    f->yt = gln_tensor_make(DT, SUM, KOUT, f->y);
    if (!f->layer) return 0;
    quantize_input(f->layer, f->x, SUM, SPLITS, 0, columnwise, &f->q);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x_quantized = &f->q.g;
    a.m_splits = SPLITS;
    a.y = &f->yt;
    f->a = a;
    return 1;
}

static void refusal_free(refusal_fix_t *f) {
    qbuf_free(&f->q);
    gln_test_free(f->x);
    gln_test_free(f->y);
    if (f->layer) CHECK_OK(gln_grouped_linear_destroy(f->layer));
}

/* A training forward expected to fail: no saved context handed out. */
static void expect_refused(gln_grouped_linear_t *layer, const gln_grouped_linear_forward_args_t *a,
                           gln_status_t status, const char *needle) {
    gln_grouped_linear_saved_t *saved = (gln_grouped_linear_saved_t *)(uintptr_t)1;
    CHECK_STATUS(gln_grouped_linear_forward(layer, a, &saved), status, needle);
    CHECK(saved == NULL);
}

static void test_refusals_shape_and_format(void) {
    refusal_fix_t f;
    if (!refusal_init(&f, GLN_RECIPE_FP8_CURRENT, 1)) return refusal_free(&f);
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(f.layer, &f.a, &saved)); /* the fixture itself is valid */
    CHECK_OK(gln_grouped_linear_saved_release(saved));

    gln_grouped_tensor_t bad = f.q.g;
    gln_grouped_linear_forward_args_t a = f.a;
    a.x_quantized = &bad;
    /* wrong scaling mode (an MXFP8 tensor for a current-scaling layer) */
    bad.packed.scaling = GLN_SCALING_MXFP8_1D;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.scaling");
    /* wrong FP8 format (E5M2 where the input is E4M3) */
    bad = f.q.g, bad.packed.dtype = GLN_DTYPE_FP8_E5M2;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.dtype");
    /* not quantized at all */
    bad = f.q.g, bad.packed.dtype = DT, bad.packed.scaling = GLN_SCALING_NONE;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.scaling");
    /* wrong shape: columns, rows */
    bad = f.q.g, bad.packed.cols = KIN - 1;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.cols");
    bad = f.q.g, bad.packed.rows = SUM + 1;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.rows");
    /* wrong member count */
    bad = f.q.g, bad.num = N - 1;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->num");
    /* wrong splits (same sum, other values) */
    const int64_t other[N] = {7, 1, 11};
    bad = f.q.g, bad.splits = other;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->splits[1]");
    bad = f.q.g, bad.splits_on_backend = 1;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->splits_on_backend");
    /* the rowwise copy fprop reads */
    bad = f.q.g, bad.packed.data = NULL;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.data");
    bad = f.q.g, bad.packed.scale_inv = NULL;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.scale_inv");
    /* version 1 of the args has no x_quantized: x is required, and whatever lies past v1 is unread */
    a = f.a;
    a.size = GLN_GROUPED_LINEAR_FORWARD_ARGS_V1_SIZE;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "x must not be NULL");
    gln_tensor_t xt = gln_tensor_make(DT, SUM, KIN, f.x);
    a.x = &xt;
    a.x_quantized = &bad; /* past the v1 size: ignored */
    CHECK_OK(gln_grouped_linear_forward(f.layer, &a, &saved));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    refusal_free(&f);
}

/* The columnwise copy: needed by a training forward whose weights require grad; not by an
 * inference forward, nor when the weights require no grad. */
static void test_columnwise_copy(void) {
    refusal_fix_t f;
    if (!refusal_init(&f, GLN_RECIPE_FP8_BLOCK, 0)) return refusal_free(&f);
    expect_refused(f.layer, &f.a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.col_data");
    gln_grouped_tensor_t bad = f.q.g;
    bad.packed.col_data = f.q.data; /* data present, scales missing */
    gln_grouped_linear_forward_args_t a = f.a;
    a.x_quantized = &bad;
    expect_refused(f.layer, &a, GLN_STATUS_INVALID_ARGUMENT, "args->x_quantized->packed.col_scale_inv");

    /* inference: rowwise only, and y bitwise equal to the forward from x */
    void *yref = gln_test_alloc(SUM * KOUT * gln_dtype_size(DT));
    gln_tensor_t xt = gln_tensor_make(DT, SUM, KIN, f.x), yr = gln_tensor_make(DT, SUM, KOUT, yref);
    gln_grouped_linear_forward_args_t ar = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    ar.x = &xt;
    ar.m_splits = SPLITS;
    ar.y = &yr;
    gln_poison(yref, DT, SUM * KOUT);
    gln_poison(f.y, DT, SUM * KOUT);
    CHECK_OK(gln_grouped_linear_forward(f.layer, &ar, NULL));
    CHECK_OK(gln_grouped_linear_forward(f.layer, &f.a, NULL));
    CHECK(gln_check_bitwise("inference y", yref, f.y, SUM * KOUT * gln_dtype_size(DT)));
    gln_test_free(yref);
    refusal_free(&f);

    /* weights without grad: a training forward (dgrad only) needs no columnwise copy either */
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = N;
    c.in_features = KIN;
    c.out_features = KOUT;
    c.recipe = GLN_RECIPE_MXFP8;
    c.weights_require_grad = 0;
    gln_grouped_linear_t *layer = NULL;
    CHECK_OK(gln_grouped_linear_create(gln_test_cpu_context(), &c, &layer));
    if (!layer) return;
    void *x = gln_test_alloc(SUM * KIN * 2), *y = gln_test_alloc(SUM * KOUT * 2), *dy = gln_test_alloc(SUM * KOUT * 2);
    void *dx = gln_test_alloc(SUM * KIN * 2);
    fill(x, SUM * KIN, 1.0, 9);
    fill(dy, SUM * KOUT, 1.0, 10);
    qbuf_t q;
    quantize_input(layer, x, SUM, SPLITS, 0, 0, &q);
    gln_tensor_t yt = gln_tensor_make(DT, SUM, KOUT, y), dyt = gln_tensor_make(DT, SUM, KOUT, dy);
    gln_tensor_t dxt = gln_tensor_make(DT, SUM, KIN, dx);
    gln_grouped_linear_forward_args_t an = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    an.x_quantized = &q.g;
    an.m_splits = SPLITS;
    an.y = &yt;
    gln_grouped_linear_saved_t *saved = NULL;
    CHECK_OK(gln_grouped_linear_forward(layer, &an, &saved));
    if (saved) CHECK_OK(gln_grouped_linear_backward(saved, &dyt, &dxt));
    CHECK_OK(gln_grouped_linear_saved_release(saved));
    qbuf_free(&q);
    gln_test_free(x), gln_test_free(y), gln_test_free(dy), gln_test_free(dx);
    CHECK_OK(gln_grouped_linear_destroy(layer));
}

/* Recipes NONE and FP8_DELAYED: NOT_SUPPORTED from the forward and from the config helper. */
static void test_unsupported_recipes(void) {
    const gln_recipe_t recipes[2] = {GLN_RECIPE_NONE, GLN_RECIPE_FP8_DELAYED};
    const char *needles[2] = {"recipe is none", "amax history would not see this input"};
    /* a well-formed current-scaling tensor, so only the recipe can be the reason */
    refusal_fix_t f;
    if (!refusal_init(&f, GLN_RECIPE_FP8_CURRENT, 1)) return refusal_free(&f);
    for (int r = 0; r < 2; r++) {
        setup_t su = {recipes[r], GLN_PATH_SPLIT, 0, 0, 0, 0};
        gln_grouped_linear_t *layer = layer_make(&su);
        if (!layer) continue;
        expect_refused(layer, &f.a, GLN_STATUS_NOT_SUPPORTED, needles[r]);
        CHECK_STATUS(gln_grouped_linear_forward(layer, &f.a, NULL), GLN_STATUS_NOT_SUPPORTED, "args->x_quantized");
        gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
        CHECK_STATUS(gln_grouped_linear_input_quant_config(layer, 1, &c), GLN_STATUS_NOT_SUPPORTED, needles[r]);
        CHECK_OK(gln_grouped_linear_destroy(layer));
    }
    refusal_free(&f);
}

/* The config helper: the layer's input config per recipe, argument checks, version-1 out. */
static void test_input_quant_config(void) {
    setup_t su = {GLN_RECIPE_FP8_BLOCK, GLN_PATH_SPLIT, 0, 0, 0, 0};
    gln_grouped_linear_t *layer = layer_make(&su);
    if (!layer) return;
    gln_quant_config_t c = GLN_QUANT_CONFIG_INIT;
    CHECK_OK(gln_grouped_linear_input_quant_config(layer, 1, &c));
    CHECK(c.size == sizeof c && c.mode == GLN_SCALING_BLOCK_1D && c.fp8_dtype == GLN_DTYPE_FP8_E4M3);
    CHECK(c.rowwise == 1 && c.columnwise == 1 && c.delayed == 0 && c.power_2_scale == 1);
    CHECK_OK(gln_grouped_linear_input_quant_config(layer, 0, &c));
    CHECK(c.columnwise == 0);
    CHECK_STATUS(gln_grouped_linear_input_quant_config(layer, 2, &c), GLN_STATUS_INVALID_ARGUMENT, "columnwise 2");
    CHECK_STATUS(gln_grouped_linear_input_quant_config(NULL, 1, &c), GLN_STATUS_INVALID_ARGUMENT, "layer");
    CHECK_STATUS(gln_grouped_linear_input_quant_config(layer, 1, NULL), GLN_STATUS_INVALID_ARGUMENT, "out");
    unsigned char raw[sizeof(gln_quant_config_t) + 8];
    memset(raw, 0xAB, sizeof raw);
    gln_quant_config_t *v1 = (gln_quant_config_t *)(void *)raw;
    v1->size = offsetof(gln_quant_config_t, amax_nan_propagate);
    CHECK_OK(gln_grouped_linear_input_quant_config(layer, 1, v1));
    CHECK(v1->mode == GLN_SCALING_BLOCK_1D && v1->size == offsetof(gln_quant_config_t, amax_nan_propagate));
    CHECK(raw[offsetof(gln_quant_config_t, amax_nan_propagate)] == 0xAB); /* nothing past v1 written */
    v1->size = 3;
    CHECK_STATUS(gln_grouped_linear_input_quant_config(layer, 1, v1), GLN_STATUS_INVALID_ARGUMENT,
                 "not a known version");
    CHECK_OK(gln_grouped_linear_destroy(layer));
    su.recipe = GLN_RECIPE_FP8_CURRENT;
    layer = layer_make(&su);
    if (!layer) return;
    c.size = sizeof c;
    CHECK_OK(gln_grouped_linear_input_quant_config(layer, 0, &c));
    CHECK(c.mode == GLN_SCALING_TENSOR && c.fp8_dtype == GLN_DTYPE_FP8_E4M3 && c.delayed == 0);
    CHECK_OK(gln_grouped_linear_destroy(layer));
}

/* The weights' config from a layer configuration: per recipe, and a sharded group with
 * quantized_shard created from it is accepted by the layer (one with another scale rule is not). */
static void test_weight_quant_config(void) {
    gln_grouped_linear_config_t lc = GLN_GROUPED_LINEAR_CONFIG_INIT;
    lc.num_experts = N;
    lc.in_features = KIN;
    lc.out_features = KOUT;
    lc.fuse_wgrad_accumulation = 1;
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    lc.recipe = GLN_RECIPE_FP8_BLOCK;
    CHECK_OK(gln_grouped_linear_weight_quant_config(&lc, &q));
    CHECK(q.mode == GLN_SCALING_BLOCK_2D && q.fp8_dtype == GLN_DTYPE_FP8_E4M3 && q.power_2_scale == 1);
    CHECK(q.rowwise == 1 && q.columnwise == 0 && q.delayed == 0);
    lc.block_fp32_scales = 1;
    CHECK_OK(gln_grouped_linear_weight_quant_config(&lc, &q));
    CHECK(q.power_2_scale == 0);
    lc.recipe = GLN_RECIPE_FP8_DELAYED; /* HYBRID: the weights stay E4M3 */
    CHECK_OK(gln_grouped_linear_weight_quant_config(&lc, &q));
    CHECK(q.mode == GLN_SCALING_TENSOR && q.fp8_dtype == GLN_DTYPE_FP8_E4M3 && q.delayed == 1);
    lc.recipe = GLN_RECIPE_MXFP8;
    lc.e8m0_rounding = GLN_E8M0_ROUND_FLOOR;
    CHECK_OK(gln_grouped_linear_weight_quant_config(&lc, &q));
    CHECK(q.mode == GLN_SCALING_MXFP8_1D && q.e8m0_rounding == GLN_E8M0_ROUND_FLOOR);
    lc.recipe = GLN_RECIPE_NONE;
    CHECK_STATUS(gln_grouped_linear_weight_quant_config(&lc, &q), GLN_STATUS_NOT_SUPPORTED, "recipe none");
    lc.recipe = (gln_recipe_t)9;
    CHECK_STATUS(gln_grouped_linear_weight_quant_config(&lc, &q), GLN_STATUS_INVALID_ARGUMENT, "cfg->recipe 9");
    CHECK_STATUS(gln_grouped_linear_weight_quant_config(NULL, &q), GLN_STATUS_INVALID_ARGUMENT, "cfg");
    lc.recipe = GLN_RECIPE_FP8_CURRENT;
    q.size = 5;
    CHECK_STATUS(gln_grouped_linear_weight_quant_config(&lc, &q), GLN_STATUS_INVALID_ARGUMENT, "out->size 5");
    q.size = sizeof q;
    lc.power_2_scales = 1;
    CHECK_OK(gln_grouped_linear_weight_quant_config(&lc, &q));
    CHECK(q.mode == GLN_SCALING_TENSOR && q.delayed == 0 && q.power_2_scale == 1);

    gln_context_t *ctx = gln_test_cpu_context();
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_comm_create_self(ctx, &comm));
    for (int other = 0; other < 2 && comm; other++) {
        gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
        sc.num_experts = N;
        sc.out_features = KOUT;
        sc.in_features = KIN;
        sc.fp8_gather = 1;
        sc.quantized_shard = 1;
        sc.fp8_quant = q;
        sc.fp8_quant.power_2_scale = other ? 0 : q.power_2_scale;
        gln_sharded_weights_t *sw = NULL;
        CHECK_OK(gln_sharded_weights_create(ctx, comm, &sc, &sw));
        if (!sw) break;
        gln_grouped_linear_config_t dc = lc;
        dc.params.distributed = gln_sharded_weights_protocol(sw);
        gln_grouped_linear_t *layer = NULL;
        if (other)
            CHECK_STATUS(gln_grouped_linear_create(ctx, &dc, &layer), GLN_STATUS_INVALID_ARGUMENT, "fp8_gather");
        else
            CHECK_OK(gln_grouped_linear_create(ctx, &dc, &layer));
        if (layer) CHECK_OK(gln_grouped_linear_destroy(layer));
        CHECK_OK(gln_sharded_weights_destroy(sw));
    }
    if (comm) CHECK_OK(gln_comm_destroy(comm));
}

GLN_TEST_MAIN(GLN_CASE(test_bitwise_equal), GLN_CASE(test_bitwise_equal_delayed_wgrad),
              GLN_CASE(test_refusals_shape_and_format), GLN_CASE(test_columnwise_copy),
              GLN_CASE(test_unsupported_recipes), GLN_CASE(test_input_quant_config),
              GLN_CASE(test_weight_quant_config))
