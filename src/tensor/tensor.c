/* Tensor descriptors, quantized layouts and grouped-tensor members (see tensor.h). */
#include "tensor/tensor.h"

#include <string.h>

#include "common/checked.h"
#include "common/error.h"

gln_tensor_t gln_tensor_make(gln_dtype_t dtype, int64_t rows, int64_t cols, void *data) {
    gln_tensor_t t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.rows = rows;
    t.cols = cols;
    t.data = data;
    t.scaling = GLN_SCALING_NONE;
    return t;
}

int gln_scaling_mode_valid(gln_scaling_mode_t mode) {
    return mode >= GLN_SCALING_NONE && mode <= GLN_SCALING_BLOCK_2D;
}

const char *gln_scaling_name(gln_scaling_mode_t mode) {
    switch (mode) {
    case GLN_SCALING_NONE: return "none";
    case GLN_SCALING_TENSOR: return "tensor";
    case GLN_SCALING_MXFP8_1D: return "mxfp8_1d";
    case GLN_SCALING_BLOCK_1D: return "block_1d";
    case GLN_SCALING_BLOCK_2D: return "block_2d";
    }
    return "invalid";
}

/* Elements of a padded scale grid gr x gc, bytes of `esize` each.  Within the size limits the
 * grids stay below 2^60 elements: the largest, a rowwise MXFP8 grid, holds at most
 * (R + 127)·(C/32 + 4) = R·C/32 + 4R + 127·C/32 + 508 elements for R, C <= 2^56 and
 * R·C <= 2^56; the checked products only make it an error instead of a wrap if it ever were not. */
static gln_status_t grid_bytes(const char *fn, const char *what, int64_t gr, int64_t gc, size_t esize,
                               size_t *bytes) {
    int64_t n;
    GLN_REQUIRE_ARG(!gln_mul_overflow_i64(gr, gc, &n), "%s: %s scale grid [%lld, %lld] overflows int64",
                    fn, what, (long long)gr, (long long)gc);
    return gln_bytes(fn, what, n, esize, bytes);
}

gln_status_t gln_layout_compute(const char *fn, gln_scaling_mode_t mode, gln_dtype_t dtype, int64_t rows,
                                int64_t cols, gln_quant_layout_t *layout) {
    memset(layout, 0, sizeof *layout);
    GLN_REQUIRE_ARG(gln_scaling_mode_valid(mode), "%s: mode %d is not a scaling mode (0..4)", fn, (int)mode);
    GLN_REQUIRE_ARG(gln_dtype_size(dtype) != 0, "%s: dtype %d is not a dtype (0..%d)", fn, (int)dtype,
                    GLN_DTYPE_COUNT_ - 1);
    GLN_REQUIRE_ARG(mode == GLN_SCALING_NONE || gln_dtype_is_fp8(dtype),
                    "%s: dtype %s must be fp8_e4m3 or fp8_e5m2 for scaling mode %s", fn,
                    gln_dtype_name(dtype), gln_scaling_name(mode));
    int64_t elems;
    GLN_TRY(gln_check_shape(fn, NULL, rows, cols, &elems));

    gln_quant_layout_t l;
    memset(&l, 0, sizeof l);
    GLN_TRY(gln_bytes(fn, "data", elems, gln_dtype_size(dtype), &l.data_bytes));
    if (mode != GLN_SCALING_NONE) {
        l.col_data_bytes = l.data_bytes;
        gln_scale_grid(mode, rows, cols, 0, &l.scale_rows, &l.scale_cols);
        gln_scale_grid(mode, rows, cols, 1, &l.col_scale_rows, &l.col_scale_cols);
        size_t ssize = gln_scale_elem_size(mode);
        GLN_TRY(grid_bytes(fn, "rowwise", l.scale_rows, l.scale_cols, ssize, &l.scale_bytes));
        GLN_TRY(grid_bytes(fn, "columnwise", l.col_scale_rows, l.col_scale_cols, ssize,
                           &l.col_scale_bytes));
    }
    *layout = l;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_quant_layout(gln_scaling_mode_t mode, gln_dtype_t dtype, int64_t rows, int64_t cols,
                              gln_quant_layout_t *layout) {
    GLN_REQUIRE_NOT_NULL("gln_quant_layout", layout);
    return gln_layout_compute("gln_quant_layout", mode, dtype, rows, cols, layout);
}

/* ---- grouped tensors --------------------------------------------------------------------- */

static gln_status_t gln_grouped_offsets_args(const char *fn, gln_scaling_mode_t mode, int32_t num,
                                             int64_t cols) {
    GLN_REQUIRE_ARG(gln_scaling_mode_valid(mode), "%s: mode %d is not a scaling mode (0..4)", fn, (int)mode);
    GLN_REQUIRE_ARG(num >= 1, "%s: num %d must be >= 1", fn, (int)num);
    return gln_check_dim(fn, "cols", cols);
}

/* The members of a grouped tensor must fit one packed tensor within the size limits: each split
 * and their sum in [0, GLN_MAX_DIM], the sum times cols <= GLN_MAX_ELEMS.  Then every member
 * scale total below stays < 2^61 (only non-empty members have scales, and there are at most
 * Σ splits of them), so the running sums need no further check. */
gln_status_t gln_grouped_scale_offsets(gln_scaling_mode_t mode, int32_t num, const int64_t *splits,
                                       int64_t cols, int64_t *row_offsets, int64_t *col_offsets) {
    static const char *fn = "gln_grouped_scale_offsets";
    GLN_TRY(gln_grouped_offsets_args(fn, mode, num, cols));
    GLN_REQUIRE_NOT_NULL(fn, splits);
    GLN_REQUIRE_ARG(row_offsets != NULL || col_offsets != NULL,
                    "%s: row_offsets and col_offsets must not both be NULL", fn);
    int64_t sum = 0;
    for (int32_t i = 0; i < num; i++) {
        GLN_REQUIRE_ARG(splits[i] >= 0 && splits[i] <= GLN_MAX_DIM - sum,
                        "%s: splits[%d] %lld must be in [0, 2^56 - %lld] (the splits sum must not "
                        "exceed GLN_MAX_DIM)",
                        fn, (int)i, (long long)splits[i], (long long)sum);
        sum += splits[i];
    }
    GLN_TRY(gln_check_elems(fn, "splits sum x cols", sum, cols, NULL));
    int64_t ro = 0, co = 0;
    for (int32_t i = 0; i < num; i++) {
        if (row_offsets) row_offsets[i] = ro;
        if (col_offsets) col_offsets[i] = co;
        ro += gln_member_scale_elems(mode, splits[i], cols, 0);
        co += gln_member_scale_elems(mode, splits[i], cols, 1);
    }
    if (row_offsets) row_offsets[num] = ro;
    if (col_offsets) col_offsets[num] = co;
    return GLN_STATUS_SUCCESS;
}

/* max Σ ceil(m_i / b) over N non-negative m_i with Σ m_i <= rows: only non-empty members count,
 * at most k = min(N, rows) of them, so Σ (m_i + b - 1) / b <= (rows + (b - 1)·k) / b. */
static int64_t gln_max_blocks(int64_t rows, int32_t num, int64_t b) {
    const int64_t k = rows < num ? rows : num;
    return (rows + (b - 1) * k) / b;
}

/* a·b·c for the bound below; the operands are bounded (rows, cols within the limits, blocks <=
 * rows), so this never fails in practice. */
static gln_status_t bound_product(const char *fn, int64_t a, int64_t b, int64_t c, int64_t *out) {
    int64_t ab;
    GLN_REQUIRE_ARG(!gln_mul_overflow_i64(a, b, &ab) && !gln_mul_overflow_i64(ab, c, out),
                    "%s: the scale-buffer bound overflows int64", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_scale_bound(gln_scaling_mode_t mode, int32_t num, int64_t rows, int64_t cols,
                                     int64_t *row_elems, int64_t *col_elems) {
    static const char *fn = "gln_grouped_scale_bound";
    GLN_TRY(gln_grouped_offsets_args(fn, mode, num, cols));
    GLN_TRY(gln_check_shape(fn, NULL, rows, cols, NULL));
    GLN_REQUIRE_ARG(row_elems != NULL || col_elems != NULL,
                    "%s: row_elems and col_elems must not both be NULL", fn);
    int64_t r = 0, c = 0;
    switch (mode) {
    case GLN_SCALING_NONE: break;
    case GLN_SCALING_TENSOR:
        r = num;
        c = num;
        break;
    case GLN_SCALING_MXFP8_1D: /* pad128(m) = 128·ceil(m/128), pad4(ceil(m/32)) = 4·ceil(m/128) */
        GLN_TRY(bound_product(fn, 128, gln_max_blocks(rows, num, 128),
                              gln_round_up(gln_ceil_div(cols, 32), 4), &r));
        GLN_TRY(bound_product(fn, 4, gln_max_blocks(rows, num, 128), gln_round_up(cols, 128), &c));
        break;
    case GLN_SCALING_BLOCK_1D:
        GLN_TRY(bound_product(fn, gln_ceil_div(cols, 128), 4, gln_max_blocks(rows, num, 4), &r));
        GLN_TRY(bound_product(fn, gln_max_blocks(rows, num, 128), gln_round_up(cols, 4), 1, &c));
        break;
    case GLN_SCALING_BLOCK_2D: /* pad4(ceil(m/128)) = 4·ceil(m/512) */
        GLN_TRY(bound_product(fn, gln_max_blocks(rows, num, 128),
                              gln_round_up(gln_ceil_div(cols, 128), 4), 1, &r));
        GLN_TRY(bound_product(fn, gln_ceil_div(cols, 128), 4, gln_max_blocks(rows, num, 512), &c));
        break;
    }
    if (row_elems) *row_elems = r;
    if (col_elems) *col_elems = c;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_tensor_validate(const char *fn, const char *name, const gln_tensor_t *t) {
    GLN_REQUIRE_ARG(t != NULL, "%s: %s must not be NULL", fn, name);
    GLN_TRY(gln_check_shape(fn, name, t->rows, t->cols, NULL));
    GLN_REQUIRE_ARG(gln_dtype_size(t->dtype) != 0, "%s: %s->dtype %d is not a dtype (0..%d)", fn, name,
                    (int)t->dtype, GLN_DTYPE_COUNT_ - 1);
    GLN_REQUIRE_ARG(gln_scaling_mode_valid(t->scaling), "%s: %s->scaling %d is not a scaling mode (0..4)", fn,
                    name, (int)t->scaling);
    if (t->scaling == GLN_SCALING_NONE) {
        GLN_REQUIRE_ARG(!gln_dtype_is_fp8(t->dtype),
                        "%s: %s->dtype %s needs a scaling mode (scaling is none)", fn, name,
                        gln_dtype_name(t->dtype));
        GLN_REQUIRE_ARG(t->data != NULL || t->rows * t->cols == 0,
                        "%s: %s->data must not be NULL (%lld x %lld)", fn, name, (long long)t->rows,
                        (long long)t->cols);
    } else {
        GLN_REQUIRE_ARG(gln_dtype_is_fp8(t->dtype),
                        "%s: %s->dtype %s must be fp8_e4m3 or fp8_e5m2 for scaling mode %s", fn, name,
                        gln_dtype_name(t->dtype), gln_scaling_name(t->scaling));
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_validate_splits(const char *fn, const char *name, const gln_grouped_tensor_t *g) {
    int64_t sum = 0;
    for (int32_t i = 0; i < g->num; i++) {
        GLN_REQUIRE_ARG(g->splits[i] >= 0, "%s: %s->splits[%d] %lld must be >= 0", fn, name, (int)i,
                        (long long)g->splits[i]);
        GLN_REQUIRE_ARG(g->splits[i] <= g->packed.rows - sum,
                        "%s: %s->splits sum exceeds packed.rows %lld (at member %d)", fn, name,
                        (long long)g->packed.rows, (int)i);
        sum += g->splits[i];
    }
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_grouped_validate(const char *fn, const char *name, const gln_grouped_tensor_t *g) {
    GLN_REQUIRE_ARG(g != NULL, "%s: %s must not be NULL", fn, name);
    GLN_REQUIRE_ARG(g->num >= 1, "%s: %s->num %d must be >= 1", fn, name, (int)g->num);
    GLN_REQUIRE_ARG(g->splits != NULL, "%s: %s->splits must not be NULL", fn, name);
    GLN_REQUIRE_ARG(g->splits_on_backend == 0 || g->splits_on_backend == 1,
                    "%s: %s->splits_on_backend %d must be 0 or 1", fn, name, g->splits_on_backend);
    char packed[96];
    size_t n = strlen(name);
    if (n > sizeof packed - 8) n = sizeof packed - 8;
    memcpy(packed, name, n);
    memcpy(packed + n, "->packed", 9);
    GLN_TRY(gln_tensor_validate(fn, packed, &g->packed));
    if (!g->splits_on_backend) GLN_TRY(gln_grouped_validate_splits(fn, name, g));
    return GLN_STATUS_SUCCESS;
}

static void *gln_byte_offset(void *p, int64_t elems, size_t esize) {
    return p ? (void *)((char *)p + (size_t)elems * esize) : NULL;
}

gln_status_t gln_grouped_member(const gln_grouped_tensor_t *g, int32_t i, gln_tensor_t *member) {
    if (!g || !member || i < 0 || i >= g->num)
        return gln_fail(GLN_STATUS_INTERNAL_ERROR, "gln_grouped_member: member %d out of range", (int)i);
    const gln_tensor_t *p = &g->packed;
    int64_t row0 = 0, srow = 0, scol = 0;
    for (int32_t j = 0; j < i; j++) {
        row0 += g->splits[j];
        srow += gln_member_scale_elems(p->scaling, g->splits[j], p->cols, 0);
        scol += gln_member_scale_elems(p->scaling, g->splits[j], p->cols, 1);
    }
    size_t esize = gln_dtype_size(p->dtype);
    size_t ssize = gln_scale_elem_size(p->scaling);
    *member = *p;
    member->rows = g->splits[i];
    member->data = gln_byte_offset(p->data, row0 * p->cols, esize);
    member->col_data = gln_byte_offset(p->col_data, row0 * p->cols, esize);
    member->scale_inv = gln_byte_offset(p->scale_inv, srow, ssize);
    member->col_scale_inv = gln_byte_offset(p->col_scale_inv, scol, ssize);
    member->amax = p->amax ? p->amax + i : NULL;
    member->scale = p->scale ? p->scale + i : NULL;
    return GLN_STATUS_SUCCESS;
}
