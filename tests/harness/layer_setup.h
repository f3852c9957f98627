/* One grouped linear layer on the CPU from a short description (recipe, path, dtypes, sizes,
 * splits), its inputs and its host outputs: the plumbing shared by the layer tests
 * test_layer_basic.c and test_layer_state.c.  Failures are recorded with CHECK / CHECK_OK. */
#ifndef GLN_TEST_LAYER_SETUP_H
#define GLN_TEST_LAYER_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"
#include "harness.h"

#define GLN_LS_NMAX 6

typedef struct setup {
    gln_recipe_t recipe;
    gln_path_t path;
    gln_dtype_t act, param;
    int bias;
    int32_t n;
    int64_t kin, kout, rows;
    int64_t splits[GLN_LS_NMAX];
    int splits_on_backend; /* grouped path: splits in backend memory (host memory on the CPU) */
    int save_original_input;
    const gln_dist_weights_t *dist;
} gln_ls_setup_t;

typedef struct data {
    void *x, *dy, *w, *b; /* x [rows,kin] act, dy [rows,kout] act, w [n,kout,kin] param, b [n,kout] param */
} gln_ls_data_t;

typedef struct result {
    void *y, *dx, *wg, *bg; /* host copies */
} gln_ls_result_t;

/* A CPU context (NULL options). */
gln_context_t *gln_ls_cpu_ctx(void);
/* count values scale·U(-1, 1) stored as dtype. */
void gln_ls_fill_uniform(void *buf, gln_dtype_t dtype, size_t count, double scale, gln_rng_t *r);
/* Inputs of s (x, dy: U(-1, 1); w: 0.2·U; b: 0.5·U) from `seed`, in guarded test buffers. */
void gln_ls_data_make(const gln_ls_setup_t *s, gln_ls_data_t *d, uint64_t seed);
void gln_ls_data_free(gln_ls_data_t *d);
/* Host outputs of s (y and dx poisoned); free checks every guard. */
void gln_ls_result_alloc(const gln_ls_setup_t *s, gln_ls_result_t *o);
void gln_ls_result_free(gln_ls_result_t *o);
/* The layer config of s over d's weights (or s->dist). */
gln_grouped_linear_config_t gln_ls_config(const gln_ls_setup_t *s, gln_ls_data_t *d);
/* The layer's weight and bias gradients into o->wg / o->bg. */
void gln_ls_copy_grads(gln_grouped_linear_t *L, const gln_ls_setup_t *s, gln_ls_result_t *o);
/* One forward + backward; lib_alloc: let the library allocate y and dx. */
void gln_ls_run(gln_context_t *ctx, const gln_ls_setup_t *s, gln_ls_data_t *d, gln_ls_result_t *o, int lib_alloc);
/* 4 experts, 48 -> 40, 60 rows split {17, 0, 38, 5}, bf16, bias, host splits. */
gln_ls_setup_t gln_ls_base_setup(gln_recipe_t recipe, gln_path_t path);
/* Two y buffers of s are equal bit for bit. */
int gln_ls_same_y(const gln_ls_setup_t *s, const void *a, const void *b);

#endif
