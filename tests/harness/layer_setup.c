/* The grouped linear layer set up from one description (layer_setup.h). */
#include "layer_setup.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

gln_context_t *gln_ls_cpu_ctx(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

void gln_ls_fill_uniform(void *buf, gln_dtype_t dtype, size_t count, double scale, gln_rng_t *r) {
    for (size_t i = 0; i < count; i++) gln_store(buf, dtype, i, scale * gln_rng_uniform(r, -1.0, 1.0));
}

void gln_ls_data_make(const gln_ls_setup_t *s, gln_ls_data_t *d, uint64_t seed) {
    gln_rng_t r = gln_rng_seed(seed);
    d->x = gln_test_alloc((size_t)s->rows * s->kin * gln_dtype_size(s->act));
    d->dy = gln_test_alloc((size_t)s->rows * s->kout * gln_dtype_size(s->act));
    d->w = gln_test_alloc((size_t)s->n * s->kout * s->kin * gln_dtype_size(s->param));
    d->b = gln_test_alloc((size_t)s->n * s->kout * gln_dtype_size(s->param));
    gln_ls_fill_uniform(d->x, s->act, (size_t)s->rows * s->kin, 1.0, &r);
    gln_ls_fill_uniform(d->dy, s->act, (size_t)s->rows * s->kout, 1.0, &r);
    gln_ls_fill_uniform(d->w, s->param, (size_t)s->n * s->kout * s->kin, 0.2, &r);
    gln_ls_fill_uniform(d->b, s->param, (size_t)s->n * s->kout, 0.5, &r);
}

void gln_ls_data_free(gln_ls_data_t *d) {
    gln_test_free(d->x);
    gln_test_free(d->dy);
    gln_test_free(d->w);
    gln_test_free(d->b);
}

void gln_ls_result_alloc(const gln_ls_setup_t *s, gln_ls_result_t *o) {
    o->y = gln_test_alloc((size_t)s->rows * s->kout * gln_dtype_size(s->act));
    o->dx = gln_test_alloc((size_t)s->rows * s->kin * gln_dtype_size(s->act));
    o->wg = gln_test_alloc((size_t)s->n * s->kout * s->kin * gln_dtype_size(s->param));
    o->bg = gln_test_alloc((size_t)s->n * s->kout * gln_dtype_size(s->param));
    gln_poison(o->y, s->act, (size_t)s->rows * s->kout);
    gln_poison(o->dx, s->act, (size_t)s->rows * s->kin);
}

void gln_ls_result_free(gln_ls_result_t *o) {
    CHECK(gln_guard_ok(o->y) && gln_guard_ok(o->dx) && gln_guard_ok(o->wg) && gln_guard_ok(o->bg));
    gln_test_free(o->y);
    gln_test_free(o->dx);
    gln_test_free(o->wg);
    gln_test_free(o->bg);
}

gln_grouped_linear_config_t gln_ls_config(const gln_ls_setup_t *s, gln_ls_data_t *d) {
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.num_experts = s->n;
    c.in_features = s->kin;
    c.out_features = s->kout;
    c.bias = s->bias;
    c.param_dtype = s->param;
    c.activation_dtype = s->act;
    c.recipe = s->recipe;
    c.path = s->path;
    c.save_original_input = s->save_original_input;
    if (s->dist) {
        c.params.distributed = s->dist;
        c.weights_require_grad = 0; /* must be ignored: the group decides */
    } else {
        c.params.weight_packed = d->w;
        c.single_grouped_weight = 1;
    }
    if (s->bias) c.params.bias_packed = d->b, c.single_grouped_bias = 1;
    return c;
}

void gln_ls_copy_grads(gln_grouped_linear_t *L, const gln_ls_setup_t *s, gln_ls_result_t *o) {
    size_t wb = (size_t)s->kout * s->kin * gln_dtype_size(s->param), bb = (size_t)s->kout * gln_dtype_size(s->param);
    for (int32_t i = 0; i < s->n; i++) {
        void *wg = NULL, *bg = NULL;
        CHECK_OK(gln_grouped_linear_grads(L, i, &wg, &bg));
        if (wg) memcpy((char *)o->wg + wb * i, wg, wb);
        if (bg) memcpy((char *)o->bg + bb * i, bg, bb);
    }
}

/* One forward + backward; lib_alloc: let the library allocate y and dx. */
void gln_ls_run(gln_context_t *ctx, const gln_ls_setup_t *s, gln_ls_data_t *d, gln_ls_result_t *o, int lib_alloc) {
    gln_grouped_linear_config_t c = gln_ls_config(s, d);
    gln_grouped_linear_t *L = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &L));
    if (!L) return;
    gln_tensor_t x = gln_tensor_make(s->act, s->rows, s->kin, d->x);
    gln_tensor_t y = gln_tensor_make(s->act, s->rows, s->kout, lib_alloc ? NULL : o->y);
    gln_tensor_t dy = gln_tensor_make(s->act, s->rows, s->kout, d->dy);
    gln_tensor_t dx = gln_tensor_make(s->act, s->rows, s->kin, lib_alloc ? NULL : o->dx);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &x;
    a.m_splits = s->splits;
    a.splits_on_backend = s->splits_on_backend;
    a.y = &y;
    gln_grouped_linear_saved_t *sv = NULL;
    CHECK_OK(gln_grouped_linear_forward(L, &a, &sv));
    CHECK(sv != NULL && y.data != NULL);
    CHECK_OK(gln_grouped_linear_backward(sv, &dy, &dx));
    CHECK(dx.data != NULL);
    if (lib_alloc && y.data && dx.data) {
        /* rows past Σ splits (grouped path) are zero in a library-allocated buffer */
        memcpy(o->y, y.data, (size_t)s->rows * s->kout * gln_dtype_size(s->act));
        memcpy(o->dx, dx.data, (size_t)s->rows * s->kin * gln_dtype_size(s->act));
    }
    gln_ls_copy_grads(L, s, o);
    CHECK_OK(gln_grouped_linear_saved_release(sv));
    CHECK_OK(gln_grouped_linear_destroy(L));
}

gln_ls_setup_t gln_ls_base_setup(gln_recipe_t recipe, gln_path_t path) {
    gln_ls_setup_t s = {recipe, path, GLN_DTYPE_BF16, GLN_DTYPE_BF16, 1, 4, 48, 40, 60, {17, 0, 38, 5}, 0, 0, NULL};
    return s;
}

int gln_ls_same_y(const gln_ls_setup_t *s, const void *a, const void *b) {
    return memcmp(a, b, (size_t)s->rows * s->kout * gln_dtype_size(s->act)) == 0;
}
