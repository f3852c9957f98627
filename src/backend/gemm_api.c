/* Public GEMM entry points: validate everything once, then dispatch through ctx->ops. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backend/api_check.h"
#include "backend/backend.h"
#include "backend/context.h"
#include "backend/ops.h"
#include "common/error.h"

/* Shape rules of a layout: which dim of A and of B is reduced, and where D's dims come from. */
typedef struct layout_rule {
    int a_red_is_rows, b_red_is_rows; /* reduction dim: rows (1) or cols (0) */
    int d_rows_from_b_rows;           /* D.rows = B.rows (1) or B.cols (0) */
    int d_cols_from_a_rows;           /* D.cols = A.rows (1) or A.cols (0) */
    const char *d_shape;              /* for messages */
} layout_rule_t;

static layout_rule_t layout_rule(gln_gemm_layout_t layout) {
    static const layout_rule_t rules[3] = {
        {0, 0, 1, 1, "D is [B.rows, A.rows]"}, /* TN: D = B·Aᵀ */
        {1, 0, 1, 0, "D is [B.rows, A.cols]"}, /* NN: D = B·A */
        {1, 1, 0, 0, "D is [B.cols, A.cols]"}, /* NT: D = Bᵀ·A */
    };
    return rules[layout];
}

static int64_t dim_of(const gln_tensor_t *t, int rows) { return rows ? t->rows : t->cols; }
static const char *dim_name(int rows) { return rows ? "rows" : "cols"; }

/* A and B agree on the reduction dim (checked unless skip_red: grouped NT members, whose
 * reduction dim is the split), and D's shape matches. */
static gln_status_t check_shapes(const char *fn, gln_gemm_layout_t layout, const gln_tensor_t *A,
                                 const char *an, const gln_tensor_t *B, const char *bn,
                                 const gln_tensor_t *D, const char *dn) {
    const layout_rule_t r = layout_rule(layout);
    const char *ln = gln_arg_layout_name(layout);
    const int64_t ka = dim_of(A, r.a_red_is_rows), kb = dim_of(B, r.b_red_is_rows);
    GLN_REQUIRE_ARG(ka == kb, "%s: %s->%s %lld != %s->%s %lld (layout %s reduces over both)", fn, an,
                    dim_name(r.a_red_is_rows), (long long)ka, bn, dim_name(r.b_red_is_rows),
                    (long long)kb, ln);
    if (!D) return GLN_STATUS_SUCCESS;
    const int64_t dr = dim_of(B, r.d_rows_from_b_rows), dc = dim_of(A, r.d_cols_from_a_rows);
    GLN_REQUIRE_ARG(D->rows == dr, "%s: %s->rows %lld != %s->%s %lld (layout %s: %s)", fn, dn,
                    (long long)D->rows, bn, dim_name(r.d_rows_from_b_rows), (long long)dr, ln,
                    r.d_shape);
    GLN_REQUIRE_ARG(D->cols == dc, "%s: %s->cols %lld != %s->%s %lld (layout %s: %s)", fn, dn,
                    (long long)D->cols, an, dim_name(r.d_cols_from_a_rows), (long long)dc, ln,
                    r.d_shape);
    return GLN_STATUS_SUCCESS;
}

/* m, n (D's dims) and k (A's reduction dim) within the backend's GEMM limit.  Grouped GEMMs
 * skip the dimension that is a split (m for TN / NN, k for NT: check_backend_splits). */
enum { DIM_M = 1, DIM_N = 2, DIM_K = 4 };
static gln_status_t check_backend_dims(const char *fn, const gln_context_t *ctx, gln_gemm_layout_t layout,
                                       const gln_tensor_t *A, const char *an, const gln_tensor_t *D,
                                       const char *dn, int dims) {
    const layout_rule_t r = layout_rule(layout);
    char what[96];
    snprintf(what, sizeof what, "m (%s->rows)", dn);
    if (dims & DIM_M) GLN_TRY(gln_arg_gemm_dim(fn, ctx, what, D->rows));
    snprintf(what, sizeof what, "n (%s->cols)", dn);
    if (dims & DIM_N) GLN_TRY(gln_arg_gemm_dim(fn, ctx, what, D->cols));
    snprintf(what, sizeof what, "k (%s->%s)", an, dim_name(r.a_red_is_rows));
    if (dims & DIM_K) GLN_TRY(gln_arg_gemm_dim(fn, ctx, what, dim_of(A, r.a_red_is_rows)));
    return GLN_STATUS_SUCCESS;
}

/* Every split of a grouped operand within the backend's GEMM limit (each is an m or a k). */
static gln_status_t check_backend_splits(const char *fn, const gln_context_t *ctx, const char *name,
                                         const gln_grouped_tensor_t *g) {
    if (!ctx->ops->max_gemm_dim || !gln_arg_splits_readable(ctx, g)) return GLN_STATUS_SUCCESS;
    char what[96];
    for (int32_t i = 0; i < g->num; i++) {
        snprintf(what, sizeof what, "%s->splits[%d]", name, (int)i);
        GLN_TRY(gln_arg_gemm_dim(fn, ctx, what, g->splits[i]));
    }
    return GLN_STATUS_SUCCESS;
}

static gln_status_t check_layout(const char *fn, gln_gemm_layout_t layout) {
    GLN_REQUIRE_ARG(layout == GLN_LAYOUT_TN || layout == GLN_LAYOUT_NN || layout == GLN_LAYOUT_NT,
                    "%s: layout %d is not a layout (0 = TN, 1 = NN, 2 = NT)", fn, (int)layout);
    return GLN_STATUS_SUCCESS;
}

static int a_columnwise(gln_gemm_layout_t layout) { return layout != GLN_LAYOUT_TN; }
static int b_columnwise(gln_gemm_layout_t layout) { return layout == GLN_LAYOUT_NT; }

gln_status_t gln_gemm(gln_context_t *ctx, gln_gemm_layout_t layout, const gln_tensor_t *A,
                      const gln_tensor_t *B, gln_tensor_t *D, const gln_tensor_t *bias,
                      int accumulate) {
    static const char *fn = "gln_gemm";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_TRY(check_layout(fn, layout));
    GLN_TRY(gln_arg_operand(fn, "A", A, a_columnwise(layout), layout));
    GLN_TRY(gln_arg_operand(fn, "B", B, b_columnwise(layout), layout));
    GLN_TRY(gln_arg_operand_pair(fn, "A", A, "B", B));
    GLN_TRY(gln_arg_hp_tensor(fn, "D", D));
    GLN_TRY(check_shapes(fn, layout, A, "A", B, "B", D, "D"));
    GLN_TRY(check_backend_dims(fn, ctx, layout, A, "A", D, "D", DIM_M | DIM_N | DIM_K));
    if (bias) GLN_TRY(gln_arg_bias(fn, "bias", bias, D->cols));
    return gln_op_gemm(ctx, layout, A, B, D, bias, accumulate);
}

/* ---- grouped ------------------------------------------------------------------------------ */

/* Both grouped tensors have the same member count and (when readable) the same splits. */
static gln_status_t check_same_splits(const char *fn, const char *xn, const gln_grouped_tensor_t *x,
                                      const char *yn, const gln_grouped_tensor_t *y, int readable) {
    GLN_REQUIRE_ARG(x->num == y->num, "%s: %s->num %d != %s->num %d", fn, xn, (int)x->num, yn,
                    (int)y->num);
    if (!readable || x->splits == y->splits) return GLN_STATUS_SUCCESS;
    for (int32_t i = 0; i < x->num; i++)
        GLN_REQUIRE_ARG(x->splits[i] == y->splits[i], "%s: %s->splits[%d] = %lld != %s->splits[%d] = %lld",
                        fn, xn, (int)i, (long long)x->splits[i], yn, (int)i, (long long)y->splits[i]);
    return GLN_STATUS_SUCCESS;
}

/* TN / NN: A = a_list[N] (each [n,k] / [k,n]), B = grouped [Σm, k], D = grouped [Σm, n]. */
static gln_status_t check_list_a(const char *fn, gln_context_t *ctx, const gln_grouped_gemm_args_t *a) {
    const gln_gemm_layout_t layout = a->layout;
    const char *ln = gln_arg_layout_name(layout);
    GLN_REQUIRE_ARG(a->a_list != NULL, "%s: args->a_list must not be NULL for layout %s", fn, ln);
    GLN_REQUIRE_ARG(a->d_grouped != NULL, "%s: args->d_grouped must not be NULL for layout %s", fn, ln);
    GLN_REQUIRE_ARG(a->a_grouped == NULL && a->d_list == NULL,
                    "%s: args->a_grouped and args->d_list must be NULL for layout %s (A is args->a_list, "
                    "D is args->d_grouped)", fn, ln);
    const int rb = gln_arg_splits_readable(ctx, a->b), rd = gln_arg_splits_readable(ctx, a->d_grouped);
    int64_t sum;
    GLN_TRY(gln_arg_grouped(fn, "args->d_grouped", a->d_grouped, rd, &sum));
    GLN_TRY(check_same_splits(fn, "args->d_grouped", a->d_grouped, "args->b", a->b, rb && rd));
    const gln_tensor_t *B = &a->b->packed, *D = &a->d_grouped->packed;
    GLN_TRY(gln_arg_hp_tensor(fn, "args->d_grouped->packed", D));
    for (int32_t i = 0; i < a->b->num; i++) {
        char an[48], bn[48];
        snprintf(an, sizeof an, "args->a_list[%d]", (int)i);
        const gln_tensor_t *Ai = &a->a_list[i];
        GLN_TRY(gln_arg_operand(fn, an, Ai, a_columnwise(layout), layout));
        GLN_TRY(gln_arg_operand_pair(fn, an, Ai, "args->b->packed", B));
        /* Shapes against the packed B / D: their row counts are the members' (split) rows. */
        gln_tensor_t d_view = *D;
        d_view.rows = B->rows;
        GLN_TRY(check_shapes(fn, layout, Ai, an, B, "args->b->packed", &d_view, "args->d_grouped->packed"));
        GLN_TRY(check_backend_dims(fn, ctx, layout, Ai, an, &d_view, "args->d_grouped->packed", DIM_N | DIM_K));
        if (a->bias_list) {
            snprintf(bn, sizeof bn, "args->bias_list[%d]", (int)i);
            GLN_TRY(gln_arg_bias(fn, bn, &a->bias_list[i], D->cols));
        }
    }
    return GLN_STATUS_SUCCESS;
}

/* NT: A = grouped [Σm, K_in], B = grouped [Σm, K_out], D = d_list[N] each [K_out, K_in]. */
static gln_status_t check_grouped_a(const char *fn, gln_context_t *ctx, const gln_grouped_gemm_args_t *a) {
    GLN_REQUIRE_ARG(a->a_grouped != NULL, "%s: args->a_grouped must not be NULL for layout NT", fn);
    GLN_REQUIRE_ARG(a->d_list != NULL, "%s: args->d_list must not be NULL for layout NT", fn);
    GLN_REQUIRE_ARG(a->a_list == NULL && a->d_grouped == NULL,
                    "%s: args->a_list and args->d_grouped must be NULL for layout NT (A is "
                    "args->a_grouped, D is args->d_list)", fn);
    GLN_REQUIRE_ARG(a->bias_list == NULL,
                    "%s: args->bias_list must be NULL for layout NT (wgrad outputs take no bias)", fn);
    const int ra = gln_arg_splits_readable(ctx, a->a_grouped), rb = gln_arg_splits_readable(ctx, a->b);
    int64_t sum;
    GLN_TRY(gln_arg_grouped(fn, "args->a_grouped", a->a_grouped, ra, &sum));
    GLN_TRY(check_same_splits(fn, "args->a_grouped", a->a_grouped, "args->b", a->b, ra && rb));
    const gln_tensor_t *A = &a->a_grouped->packed, *B = &a->b->packed;
    GLN_TRY(gln_arg_operand(fn, "args->a_grouped->packed", A, 1, GLN_LAYOUT_NT));
    GLN_TRY(gln_arg_operand_pair(fn, "args->a_grouped->packed", A, "args->b->packed", B));
    for (int32_t i = 0; i < a->b->num; i++) {
        char dn[48];
        snprintf(dn, sizeof dn, "args->d_list[%d]", (int)i);
        GLN_TRY(gln_arg_hp_tensor(fn, dn, &a->d_list[i]));
        /* Member rows are the splits; the packed row counts need not agree, only the columns. */
        gln_tensor_t a_view = *A;
        a_view.rows = B->rows;
        GLN_TRY(check_shapes(fn, GLN_LAYOUT_NT, &a_view, "args->a_grouped->packed", B, "args->b->packed",
                             &a->d_list[i], dn));
        GLN_TRY(check_backend_dims(fn, ctx, GLN_LAYOUT_NT, &a_view, "args->a_grouped->packed", &a->d_list[i], dn,
                                   DIM_M | DIM_N));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_gemm(gln_context_t *ctx, const gln_grouped_gemm_args_t *args) {
    static const char *fn = "gln_grouped_gemm";
    GLN_REQUIRE_NOT_NULL(fn, ctx);
    GLN_REQUIRE_NOT_NULL(fn, args);
    /* Exactly the sizes of known versions: the first (up to accumulate) and the current one
     * (block_scales_pow2 added); a size ending inside a field would splice caller bytes into
     * it.  Only the caller's version is read; later fields keep their defaults. */
    const size_t v1 = offsetof(gln_grouped_gemm_args_t, block_scales_pow2);
    GLN_REQUIRE_ARG(args->size == v1 || args->size == sizeof(gln_grouped_gemm_args_t),
                    "%s: args->size %zu is not a known version (%zu or %zu; start from "
                    "GLN_GROUPED_GEMM_ARGS_INIT)", fn, args->size, v1, sizeof(gln_grouped_gemm_args_t));
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    memcpy(&a, args, args->size);
    a.size = sizeof a;
    a.accumulate = a.accumulate != 0;
    a.block_scales_pow2 = a.block_scales_pow2 != 0;
    GLN_TRY(check_layout(fn, a.layout));
    int64_t sum;
    GLN_TRY(gln_arg_grouped(fn, "args->b", a.b, a.b ? gln_arg_splits_readable(ctx, a.b) : 0, &sum));
    GLN_TRY(gln_arg_operand(fn, "args->b->packed", &a.b->packed, b_columnwise(a.layout), a.layout));
    if (a.layout == GLN_LAYOUT_NT) {
        GLN_TRY(check_grouped_a(fn, ctx, &a));
    } else {
        GLN_TRY(check_list_a(fn, ctx, &a));
    }
    GLN_TRY(check_backend_splits(fn, ctx, "args->b", a.b));
    return gln_op_grouped_gemm(ctx, &a);
}
