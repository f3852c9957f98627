/* Fuzz harness 1: the grouped linear layer — create with a fuzzed configuration (recipe, dims,
 * dtypes, path, flags, layer-owned or caller-supplied parameters), then forward and backward
 * with fuzzed splits, shapes and data, and the accessors.
 *
 * Promises checked beyond "no memory error, no UB, no leak":
 *   - a failing call returns a known status with a message (fz_status);
 *   - wild sizes (negative, past 2^56 elements, overflowing products) are refused;
 *   - a successful forward / backward writes every row of y / dx that the splits cover, and
 *     with tame data (no NaN / Inf inputs) writes finite values there;
 *   - a failed forward sets *saved to NULL;
 *   - a refused backward leaves a caller's dx untouched, and a second backward on the same
 *     saved context is refused with GLN_STATUS_INVALID_STATE;
 *   - the split and grouped paths give bit-identical y and dx (DESIGN §4, the same kernels on
 *     the CPU), checked on inputs whose splits cover every row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_EXPERTS = 4, MAX_SPLIT = 24 };

typedef struct layer_case {
    gln_grouped_linear_config_t cfg;
    int wild;   /* some value must make create refuse */
    int parity; /* also run the other path and compare bitwise */
    void *weights[MAX_EXPERTS], *biases[MAX_EXPERTS];
    float *main_grads[MAX_EXPERTS];
} layer_case_t;

static const float INIT_STD[] = {0.0f, 0.02f, 0.5f, 1.0f, -1.0f, NAN};
static const float EPSILON[] = {0.0f, 1e-6f, 1.0f, -1.0f, INFINITY};

static int64_t feature_dim(fz_t *f, int *wild) {
    int64_t d = fz_size(f, 40, wild);
    if (d >= 0 && d <= 40 && fz_u8(f) >= 0xe0) d += 120; /* sometimes across a 128 block */
    return d;
}

static int64_t prod_or_max(int64_t a, int64_t b) {
    int64_t p;
    return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

/* Caller-supplied parameters (per-expert lists or packed buffers), when the dims are tame. */
static void fill_params(fz_t *f, layer_case_t *lc) {
    gln_grouped_linear_config_t *c = &lc->cfg;
    gln_grouped_linear_params_t *p = &c->params;
    int64_t n = c->num_experts, kin = c->in_features, kout = c->out_features;
    size_t ps = gln_dtype_size(c->param_dtype);
    int weights = fz_pick(f, 3), biases = fz_pick(f, 3), grads = fz_pick(f, 3);
    if (lc->wild || n < 1 || n > MAX_EXPERTS || ps == 0 || kin < 0 || kout < 0) return;
    size_t w = (size_t)(kout * kin);
    if (weights == 1) {
        for (int i = 0; i < n; i++) lc->weights[i] = fz_tensor(f, c->param_dtype, kout, kin).data;
        p->weights = lc->weights;
    } else if (weights == 2) {
        p->weight_packed = fz_tensor(f, c->param_dtype, kout * n, kin).data;
    }
    if (biases == 1) {
        for (int i = 0; i < n; i++) lc->biases[i] = fz_tensor(f, c->param_dtype, 1, kout).data;
        p->biases = lc->biases;
    } else if (biases == 2) {
        p->bias_packed = fz_tensor(f, c->param_dtype, n, kout).data;
    }
    if (grads == 1) {
        for (int i = 0; i < n; i++) lc->main_grads[i] = fz_alloc(f, w * sizeof(float));
        p->main_grads = lc->main_grads;
    } else if (grads == 2) {
        p->main_grad_packed = fz_alloc(f, w * n * sizeof(float));
    }
    /* fz_alloc(0) may give NULL: the lists then hold a NULL entry, which create must refuse. */
}

static void read_config(fz_t *f, layer_case_t *lc) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    int wild = 0;
    c.num_experts = (int32_t)fz_int(f, 0, MAX_EXPERTS);
    c.in_features = feature_dim(f, &wild);
    c.out_features = feature_dim(f, &wild);
    c.bias = fz_bool(f);
    c.param_dtype = (gln_dtype_t)fz_pick(f, 4); /* 3 = fp8_e4m3: refused */
    c.activation_dtype = (gln_dtype_t)fz_pick(f, 4);
    c.recipe = (gln_recipe_t)fz_pick(f, 6); /* 5: refused */
    c.fp8_format = (gln_fp8_format_t)fz_pick(f, 4);
    c.path = (gln_path_t)fz_pick(f, 3);
    uint8_t flags = fz_u8(f);
    c.fuse_wgrad_accumulation = flags & 1;
    c.delay_wgrad_compute = (flags >> 1) & 1;
    c.save_original_input = (flags >> 2) & 1;
    c.weights_require_grad = !((flags >> 3) & 1);
    c.power_2_scales = (flags >> 4) & 1;
    c.block_fp32_scales = (flags >> 5) & 1;
    c.single_grouped_weight = (flags >> 6) & 1;
    c.single_grouped_bias = (flags >> 7) & 1;
    c.amax_history_len = (int)fz_int(f, 0, 4);
    int wild_history = 0;
    if (f->wild && fz_u8(f) == 0xff) {
        c.amax_history_len = INT32_MAX; /* 3·N·len slots of history: must fail cleanly */
        wild_history = c.recipe == GLN_RECIPE_FP8_DELAYED;
    }
    c.margin = (int)fz_int(f, -1, 3);
    c.amax_algo = (gln_amax_algo_t)fz_pick(f, 3);
    c.amax_epsilon = EPSILON[fz_pick(f, 5)];
    c.e8m0_rounding = (gln_e8m0_rounding_t)fz_pick(f, 3);
    c.seed = fz_u32(f);
    c.init_std = INIT_STD[fz_pick(f, 6)];
    /* A wild dim only counts when the layer-owned storage would pass 2^56 elements. */
    if (wild && c.in_features >= 0 && c.out_features >= 0 && c.num_experts >= 1 &&
        prod_or_max(prod_or_max(c.in_features, c.out_features), c.num_experts) <= GLN_MAX_ELEMS) {
        c.in_features &= 31;
        c.out_features &= 31;
        wild = 0;
    }
    lc->cfg = c;
    lc->wild = wild || wild_history;
    lc->parity = fz_bool(f);
    fill_params(f, lc);
}

typedef struct run_out {
    gln_status_t fwd, bwd;
    gln_tensor_t y, dx;
} run_out_t;

/* Rows [0, covered) of a [rows, cols] output: every element written, finite with tame data. */
static void check_written(const char *what, const gln_tensor_t *t, int64_t covered, int tame) {
    size_t n = (size_t)(covered * t->cols);
    FZ_ASSERT(t->data || n == 0, "%s: data is NULL after success", what);
    if (!tame) return; /* NaN / Inf inputs may legitimately give NaN */
    FZ_ASSERT(fz_no_nan(t->data, t->dtype, n), "%s: a covered element is NaN (unwritten?)", what);
    FZ_ASSERT(fz_all_finite(t->data, t->dtype, n), "%s: non-finite from tame data", what);
}

static int64_t splits_sum(const int64_t *s, int n) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++)
        if (__builtin_add_overflow(sum, s[i], &sum)) return -1;
    return sum;
}

/* One forward (+ backward) on `layer` with the given inputs. */
static void run_step(fz_t *f, gln_grouped_linear_t *layer, const gln_grouped_linear_config_t *c,
                     const gln_tensor_t *x, const int64_t *splits, const gln_tensor_t *dy,
                     int options, run_out_t *out) {
    int n = c->num_experts, tame = !f->specials && c->init_std <= 1.0f;
    int64_t covered = splits_sum(splits, n);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    gln_tensor_t y = gln_tensor_make(c->activation_dtype, x->rows, c->out_features, NULL);
    if (options & 1) y = fz_tensor_poisoned(f, c->activation_dtype, x->rows, c->out_features);
    fa.x = x;
    fa.m_splits = splits;
    fa.y = &y;
    fa.microbatch = (gln_microbatch_t)((options >> 1) & 3);
    fa.input_requires_grad = !((options >> 3) & 1);
    fa.splits_on_backend = (options >> 4) & 1;
    int inference = (options >> 5) & 1;
    gln_grouped_linear_saved_t *saved = (gln_grouped_linear_saved_t *)&fa; /* must be reset */
    out->fwd = fz_status(gln_grouped_linear_forward(layer, &fa, inference ? NULL : &saved),
                         "gln_grouped_linear_forward");
    out->bwd = GLN_STATUS_INVALID_STATE;
    out->y = y;
    out->dx = gln_tensor_make(c->activation_dtype, 0, 0, NULL);
    if (out->fwd != GLN_STATUS_SUCCESS) {
        FZ_ASSERT(inference || saved == NULL, "a failed forward left *saved set");
        return;
    }
    FZ_ASSERT(covered >= 0 && covered <= x->rows,
              "forward accepted splits summing to %lld for %lld rows", (long long)covered,
              (long long)x->rows);
    check_written("forward y", &y, covered, tame);
    if (inference) return;
    FZ_ASSERT(saved != NULL && saved != (void *)&fa, "forward succeeded without a saved context");

    int dx_mode = (options >> 6) & 3; /* 0: none, 1: library-allocated, 2, 3: caller buffer */
    gln_tensor_t dx = gln_tensor_make(c->activation_dtype, x->rows, c->in_features, NULL), dx_copy;
    size_t dx_bytes = (size_t)(x->rows * c->in_features) * gln_dtype_size(c->activation_dtype);
    if (dx_mode >= 2) {
        dx = fz_tensor_poisoned(f, c->activation_dtype, x->rows, c->in_features);
        dx_copy = fz_tensor_poisoned(f, c->activation_dtype, x->rows, c->in_features);
        if (dx_bytes) memcpy(dx_copy.data, dx.data, dx_bytes);
    }
    out->bwd = fz_status(gln_grouped_linear_backward(saved, dy, dx_mode ? &dx : NULL),
                         "gln_grouped_linear_backward");
    if (out->bwd == GLN_STATUS_SUCCESS) {
        if (dx_mode) check_written("backward dx", &dx, covered, tame);
        gln_tensor_t dx2 = dx;
        gln_status_t again = gln_grouped_linear_backward(saved, dy, dx_mode ? &dx2 : NULL);
        FZ_ASSERT(fz_status(again, "gln_grouped_linear_backward") == GLN_STATUS_INVALID_STATE,
                  "a second backward on one saved context returned %s", gln_status_string(again));
        if (c->delay_wgrad_compute)
            fz_status(gln_grouped_linear_backward_dw(layer), "gln_grouped_linear_backward_dw");
    } else if (dx_mode >= 2 && dx_bytes) {
        FZ_ASSERT(memcmp(dx.data, dx_copy.data, dx_bytes) == 0, "a refused backward wrote dx");
    }
    out->dx = dx;
    /* y / dx owned by the saved context die with it: keep copies for the parity check. */
    if (dx_mode == 1 && out->bwd == GLN_STATUS_SUCCESS && dx_bytes) {
        gln_tensor_t keep = fz_tensor_poisoned(f, c->activation_dtype, x->rows, c->in_features);
        memcpy(keep.data, dx.data, dx_bytes);
        out->dx = keep;
    }
    size_t y_bytes = (size_t)(x->rows * c->out_features) * gln_dtype_size(c->activation_dtype);
    if (!(options & 1) && y_bytes) {
        gln_tensor_t keep = fz_tensor_poisoned(f, c->activation_dtype, x->rows, c->out_features);
        memcpy(keep.data, y.data, y_bytes);
        out->y = keep;
    }
    FZ_ASSERT(gln_grouped_linear_saved_release(saved) == GLN_STATUS_SUCCESS,
              "saved_release failed");
}

static void poke_accessors(fz_t *f, gln_grouped_linear_t *layer, int32_t n) {
    void *w, *b;
    int32_t e = (int32_t)fz_int(f, -1, n);
    fz_status(gln_grouped_linear_weight(layer, e, &w, &b), "gln_grouped_linear_weight");
    fz_status(gln_grouped_linear_grads(layer, e, &w, &b), "gln_grouped_linear_grads");
    float *scale, *hist;
    int32_t slots, len;
    fz_status(gln_grouped_linear_fp8_state(layer, fz_bool(f), &scale, &hist, &slots, &len),
              "gln_grouped_linear_fp8_state");
    if (fz_bool(f)) fz_status(gln_grouped_linear_zero_grad(layer), "gln_grouped_linear_zero_grad");
    if (fz_bool(f))
        fz_status(gln_grouped_linear_weights_updated(layer), "gln_grouped_linear_weights_updated");
}

static int same_bits(const gln_tensor_t *a, const gln_tensor_t *b, int64_t rows) {
    size_t bytes = (size_t)(rows * a->cols) * gln_dtype_size(a->dtype);
    if (!bytes) return 1;
    if (!a->data || !b->data) return 0;
    return memcmp(a->data, b->data, bytes) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    layer_case_t lc;
    memset(&lc, 0, sizeof lc);
    read_config(&f, &lc);
    gln_grouped_linear_t *layer = (gln_grouped_linear_t *)&lc; /* must be reset to NULL */
    gln_status_t st =
        fz_status(gln_grouped_linear_create(ctx, &lc.cfg, &layer), "gln_grouped_linear_create");
    if (lc.wild)
        FZ_ASSERT(st != GLN_STATUS_SUCCESS,
                  "gln_grouped_linear_create succeeded on wild sizes: N %d, in %lld, out %lld, "
                  "param dtype %d, history %d",
                  (int)lc.cfg.num_experts, (long long)lc.cfg.in_features,
                  (long long)lc.cfg.out_features, (int)lc.cfg.param_dtype, lc.cfg.amax_history_len);
    if (st != GLN_STATUS_SUCCESS) {
        FZ_ASSERT(layer == NULL, "a failed create left *layer set");
        fz_free_all();
        return 0;
    }
    const gln_grouped_linear_config_t *c = &lc.cfg;
    int n = c->num_experts;

    /* Inputs: splits, then x rows = their sum (+ extra rows), then data. */
    int64_t splits[MAX_EXPERTS];
    int wild = 0;
    for (int i = 0; i < n; i++) splits[i] = fz_size(&f, MAX_SPLIT, &wild);
    int64_t sum = splits_sum(splits, n);
    int64_t rows = wild ? fz_int(&f, 0, 8) : sum + (fz_u8(&f) >= 0xc0 ? fz_int(&f, -1, 3) : 0);
    if (rows < 0) rows = 0;
    gln_tensor_t x = fz_tensor(&f, c->activation_dtype, rows, c->in_features);
    if (fz_u8(&f) == 0xff) x.dtype = (gln_dtype_t)((x.dtype + 1) % 3); /* wrong dtype: refused */
    int64_t dy_rows = fz_u8(&f) == 0xff ? rows + 1 : rows;             /* wrong shape: refused */
    gln_tensor_t dy = fz_tensor(&f, c->activation_dtype, dy_rows, c->out_features);
    int options = fz_u8(&f);

    run_out_t a;
    run_step(&f, layer, c, &x, splits, &dy, options, &a);
    if (wild) FZ_ASSERT(a.fwd != GLN_STATUS_SUCCESS, "forward accepted a wild split");
    if (fz_bool(&f)) { /* a second step (microbatch caching, delayed-scaling history) */
        run_out_t b;
        run_step(&f, layer, c, &x, splits, &dy, fz_u8(&f), &b);
    }
    poke_accessors(&f, layer, n);

    /* Parity: the same configuration on the other path, same weights (same seed), same data. */
    if (lc.parity && sum == rows && (c->path == GLN_PATH_SPLIT || c->path == GLN_PATH_GROUPED)) {
        gln_grouped_linear_config_t c2 = *c;
        c2.path = c->path == GLN_PATH_SPLIT ? GLN_PATH_GROUPED : GLN_PATH_SPLIT;
        gln_grouped_linear_t *l1 = NULL, *l2 = NULL;
        run_out_t r1, r2;
        int opt = options & ~(1 << 4 | 1 << 5); /* host splits, with a saved context */
        FZ_ASSERT(gln_grouped_linear_create(ctx, c, &l1) == GLN_STATUS_SUCCESS, "parity create 1");
        fz_status(gln_grouped_linear_create(ctx, &c2, &l2),
                  "gln_grouped_linear_create (other path)");
        FZ_ASSERT(l2 != NULL, "the other path refused a configuration the first accepted: %s",
                  gln_last_error());
        fz_t f1 = f, f2 = f; /* both runs draw the same poison choices */
        run_step(&f1, l1, c, &x, splits, &dy, opt, &r1);
        run_step(&f2, l2, &c2, &x, splits, &dy, opt, &r2);
        FZ_ASSERT(r1.fwd == r2.fwd, "forward status differs between paths: %d vs %d", r1.fwd,
                  r2.fwd);
        if (r1.fwd == GLN_STATUS_SUCCESS)
            FZ_ASSERT(same_bits(&r1.y, &r2.y, rows),
                      "y differs between the split and grouped paths");
        FZ_ASSERT(r1.bwd == r2.bwd, "backward status differs between paths: %d vs %d", r1.bwd,
                  r2.bwd);
        if (r1.bwd == GLN_STATUS_SUCCESS && r1.dx.data)
            FZ_ASSERT(same_bits(&r1.dx, &r2.dx, rows),
                      "dx differs between the split and grouped paths");
        gln_grouped_linear_destroy(l1);
        gln_grouped_linear_destroy(l2);
    }
    FZ_ASSERT(gln_grouped_linear_destroy(layer) == GLN_STATUS_SUCCESS, "destroy failed: %s",
              gln_last_error());
    fz_free_all();
    return 0;
}
