/* Storage the layer owns for one call or one saved context: grouped activation buffers (x, y,
 * dy, dx and their quantized copies) and weight sets (N [K_out, K_in] tensors).
 *
 * Quantized grouped layout (the one gln_grouped_quantize documents): member i's data at element
 * offset row_start[i]·cols in data and col_data, its scales at gln_grouped_scale_offsets()[i];
 * per-tensor modes keep scale_inv / col_scale_inv / scale / amax as arrays of N floats.  With
 * backend-resident splits the scale buffers are sized by gln_grouped_scale_bound. */
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "layer/layer.h"
#include "tensor/tensor.h"

/* Internal buffers of the layer: their sizes follow from arguments validated at the public
 * boundary, so these checks never fail for a validated call (the messages say where). */
static const char *FN = "grouped linear buffers";

static size_t scale_elem_size(gln_scaling_mode_t mode) {
    return mode == GLN_SCALING_MXFP8_1D ? 1u : sizeof(float);
}

/* Host offsets: row_start[N+1] and, for quantized modes, scale offsets srow / scol [N+1]. */
static gln_status_t buffer_offsets(gln_group_buffer_t *b, gln_scaling_mode_t mode) {
    int32_t n = b->g.num;
    b->offs = calloc(3 * ((size_t)n + 1), sizeof(int64_t));
    if (!b->offs) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "grouped linear: out of host memory");
    int64_t *rs = b->offs, *sr = rs + n + 1, *sc = sr + n + 1;
    for (int32_t i = 0; i < n; i++) rs[i + 1] = rs[i] + b->g.splits[i];
    if (mode == GLN_SCALING_TENSOR) {
        for (int32_t i = 0; i <= n; i++) sr[i] = sc[i] = i;
    } else if (mode != GLN_SCALING_NONE) {
        return gln_grouped_scale_offsets(mode, n, b->g.splits, b->g.packed.cols, sr, sc);
    }
    return GLN_STATUS_SUCCESS;
}

static void buffer_init(gln_group_buffer_t *b, int32_t num, const int64_t *splits, int splits_on_backend) {
    memset(b, 0, sizeof *b);
    b->g.num = num;
    b->g.splits = splits;
    b->g.splits_on_backend = splits_on_backend;
}

gln_status_t gln_group_buffer_alloc_high_precision(gln_context_t *ctx, gln_dtype_t dtype, int64_t rows,
                                                   int64_t cols, int32_t num, const int64_t *splits,
                                                   int splits_on_backend, gln_group_buffer_t *b) {
    gln_status_t st;
    buffer_init(b, num, splits, splits_on_backend);
    b->g.packed = gln_tensor_make(dtype, rows, cols, NULL);
    if (!splits_on_backend) GLN_CHECK(st, fail, buffer_offsets(b, GLN_SCALING_NONE));
    size_t bytes;
    GLN_CHECK(st, fail, gln_shape_bytes(FN, "a grouped buffer", rows, cols, gln_dtype_size(dtype), &bytes));
    /* +1: a buffer of zero rows still gets a valid (never read) address */
    GLN_CHECK(st, fail, gln_ctx_alloc(ctx, bytes + 1, &b->mem_row));
    b->g.packed.data = b->mem_row;
    return GLN_STATUS_SUCCESS;
fail:
    gln_group_buffer_free(ctx, b);
    return st;
}

/* One copy (rowwise or columnwise): data then scales in one allocation. */
static gln_status_t buffer_alloc_copy(gln_context_t *ctx, size_t data_bytes, size_t scale_bytes,
                                      void **mem, void **data, void **scales) {
    size_t off = gln_align_up(data_bytes, GLN_LAYER_ALIGN);
    GLN_TRY(gln_ctx_alloc(ctx, off + scale_bytes + 1, mem));
    *data = *mem;
    *scales = (char *)*mem + off;
    /* Scale padding is never read by a GEMM; zero it anyway so buffers are deterministic. */
    return gln_ctx_zero(ctx, *scales, scale_bytes);
}

gln_status_t gln_group_buffer_alloc_quantized(gln_context_t *ctx, const gln_quant_config_t *cfg, int64_t rows,
                                              int64_t cols, int32_t num, const int64_t *splits,
                                              int splits_on_backend, gln_group_buffer_t *b) {
    gln_status_t st;
    gln_tensor_t *p = &b->g.packed;
    buffer_init(b, num, splits, splits_on_backend);
    *p = gln_tensor_make(cfg->fp8_dtype, rows, cols, NULL);
    p->scaling = cfg->mode;
    int64_t row_elems = num, col_elems = num;
    if (!splits_on_backend) {
        GLN_CHECK(st, fail, buffer_offsets(b, cfg->mode));
        if (cfg->mode != GLN_SCALING_TENSOR) {
            row_elems = b->offs[2 * (num + 1) - 1];
            col_elems = b->offs[3 * (num + 1) - 1];
        }
    } else if (cfg->mode != GLN_SCALING_TENSOR) {
        GLN_CHECK(st, fail, gln_grouped_scale_bound(cfg->mode, num, rows, cols, &row_elems, &col_elems));
    }
    size_t es = scale_elem_size(cfg->mode), data_bytes, row_bytes, col_bytes;
    GLN_CHECK(st, fail, gln_shape_bytes(FN, "a quantized grouped buffer", rows, cols, 1, &data_bytes));
    GLN_CHECK(st, fail, gln_bytes(FN, "rowwise scales", row_elems, es, &row_bytes));
    GLN_CHECK(st, fail, gln_bytes(FN, "columnwise scales", col_elems, es, &col_bytes));
    if (cfg->rowwise)
        GLN_CHECK(st, fail,
                  buffer_alloc_copy(ctx, data_bytes, row_bytes, &b->mem_row, &p->data, &p->scale_inv));
    if (cfg->columnwise)
        GLN_CHECK(st, fail, buffer_alloc_copy(ctx, data_bytes, col_bytes, &b->mem_col, &p->col_data,
                                              &p->col_scale_inv));
    if (cfg->mode == GLN_SCALING_TENSOR) {
        GLN_CHECK(st, fail, gln_ctx_alloc(ctx, 2 * (size_t)num * sizeof(float), &b->mem_aux));
        GLN_CHECK(st, fail, gln_ctx_zero(ctx, b->mem_aux, 2 * (size_t)num * sizeof(float)));
        p->scale = b->mem_aux;
        p->amax = p->scale + num;
    }
    return GLN_STATUS_SUCCESS;
fail:
    gln_group_buffer_free(ctx, b);
    return st;
}

gln_status_t gln_group_buffer_wrap(const gln_tensor_t *t, int32_t num, const int64_t *splits,
                                   int splits_on_backend, gln_group_buffer_t *b) {
    buffer_init(b, num, splits, splits_on_backend);
    b->g.packed = *t;
    if (splits_on_backend) return GLN_STATUS_SUCCESS;
    return buffer_offsets(b, t->scaling);
}

void gln_group_buffer_free(gln_context_t *ctx, gln_group_buffer_t *b) {
    gln_ctx_free(ctx, b->mem_row);
    gln_ctx_free(ctx, b->mem_col);
    gln_ctx_free(ctx, b->mem_aux);
    free(b->offs);
    memset(b, 0, sizeof *b);
}

void gln_group_buffer_drop_rowwise(gln_context_t *ctx, gln_group_buffer_t *b) {
    if (b->g.packed.scaling == GLN_SCALING_NONE || !b->mem_col) return;
    gln_ctx_free(ctx, b->mem_row);
    b->mem_row = NULL;
    b->g.packed.data = NULL;
    b->g.packed.scale_inv = NULL;
}

gln_status_t gln_output_alloc(gln_context_t *ctx, const gln_tensor_t *t, void **buf) {
    size_t bytes;
    GLN_TRY(gln_shape_bytes(FN, "an output", t->rows, t->cols, gln_dtype_size(t->dtype), &bytes));
    GLN_TRY(gln_ctx_alloc(ctx, bytes + 1, buf)); /* +1: a valid address for zero rows too */
    return gln_ctx_zero(ctx, *buf, bytes);
}

/* ------------------------------------------------------------------ weight sets */

static gln_status_t weight_set_tensors(int32_t num, gln_weight_set_t *w) {
    memset(w, 0, sizeof *w);
    w->num = num;
    w->t = calloc((size_t)num, sizeof *w->t);
    return w->t ? GLN_STATUS_SUCCESS
                : gln_fail(GLN_STATUS_OUT_OF_MEMORY, "grouped linear: out of host memory");
}

gln_status_t gln_weight_set_alloc_high_precision(gln_context_t *ctx, gln_dtype_t dtype, int32_t num,
                                                 int64_t rows, int64_t cols, gln_weight_set_t *w) {
    size_t each, all;
    GLN_TRY(gln_shape_bytes(FN, "a weight set", rows, cols, gln_dtype_size(dtype), &each));
    GLN_REQUIRE(!gln_mul_overflow_size(each, (size_t)num, &all), GLN_STATUS_INVALID_ARGUMENT,
                "%s: %d weights of %zu bytes overflow size_t", FN, (int)num, each);
    GLN_TRY(weight_set_tensors(num, w));
    gln_status_t st = gln_ctx_alloc(ctx, all + 1, &w->mem);
    if (st != GLN_STATUS_SUCCESS) {
        gln_weight_set_free(ctx, w);
        return st;
    }
    for (int32_t i = 0; i < num; i++)
        w->t[i] = gln_tensor_make(dtype, rows, cols, (char *)w->mem + each * (size_t)i);
    return GLN_STATUS_SUCCESS;
}

/* Laid out as a grouped tensor of `num` members of `rows` rows (the layout gln_grouped_quantize
 * documents): all rowwise data, then all columnwise data (member i's transposed copy at element
 * i·rows·cols), then the members' scales one after the other, each region 256-byte aligned; so
 * `packed` describes the whole set and one grouped quantization fills every weight. */
gln_status_t gln_weight_set_alloc_quantized(gln_context_t *ctx, const gln_quant_config_t *cfg, int32_t num,
                                            int64_t rows, int64_t cols, gln_weight_set_t *w) {
    gln_status_t st;
    gln_quant_layout_t lay;
    GLN_TRY(weight_set_tensors(num, w));
    GLN_CHECK(st, fail, gln_layout_compute(FN, cfg->mode, cfg->fp8_dtype, rows, cols, &lay));
    const size_t per[4] = {cfg->rowwise ? lay.data_bytes : 0, cfg->columnwise ? lay.col_data_bytes : 0,
                           cfg->rowwise ? lay.scale_bytes : 0, cfg->columnwise ? lay.col_scale_bytes : 0};
    size_t off[5], all = 0;
    for (int r = 0; r < 4; r++) {
        size_t region;
        GLN_CHECK_COND(st, fail, !gln_mul_overflow_size(per[r], (size_t)num, &region) &&
                                     !gln_add_overflow_size(all, gln_align_up(region, GLN_LAYER_ALIGN), &all),
                       GLN_STATUS_INVALID_ARGUMENT, "%s: %d quantized weights of [%lld, %lld] overflow size_t", FN,
                       (int)num, (long long)rows, (long long)cols);
        off[r] = all - gln_align_up(region, GLN_LAYER_ALIGN);
    }
    off[4] = all;
    all += 2 * (size_t)num * sizeof(float); /* aux: scale[N], amax[N] */
    GLN_CHECK(st, fail, gln_ctx_alloc(ctx, all, &w->mem));
    /* Zero everything once: scale padding and per-tensor aux must start deterministic. */
    GLN_CHECK(st, fail, gln_ctx_zero(ctx, w->mem, all));
    char *base = w->mem;
    w->aux = (float *)(void *)(base + off[4]);
    w->packed = gln_tensor_make(cfg->fp8_dtype, rows * (int64_t)num, cols, cfg->rowwise ? base + off[0] : NULL);
    w->packed.scaling = cfg->mode;
    if (cfg->rowwise) w->packed.scale_inv = base + off[2];
    if (cfg->columnwise) w->packed.col_data = base + off[1], w->packed.col_scale_inv = base + off[3];
    if (cfg->mode == GLN_SCALING_TENSOR) w->packed.scale = w->aux, w->packed.amax = w->aux + num;
    for (int32_t i = 0; i < num; i++) {
        gln_tensor_t *t = &w->t[i];
        const size_t k = (size_t)i;
        *t = gln_tensor_make(cfg->fp8_dtype, rows, cols, NULL);
        t->scaling = cfg->mode;
        if (cfg->rowwise) t->data = base + off[0] + k * per[0], t->scale_inv = base + off[2] + k * per[2];
        if (cfg->columnwise) t->col_data = base + off[1] + k * per[1], t->col_scale_inv = base + off[3] + k * per[3];
        if (cfg->mode == GLN_SCALING_TENSOR) t->scale = w->aux + i, t->amax = w->aux + num + i;
    }
    return GLN_STATUS_SUCCESS;
fail:
    gln_weight_set_free(ctx, w);
    return st;
}

gln_status_t gln_weight_set_wrap(int32_t num, gln_dtype_t dtype, int64_t rows, int64_t cols,
                                 void *const *ptrs, gln_weight_set_t *w) {
    GLN_TRY(weight_set_tensors(num, w));
    for (int32_t i = 0; i < num; i++) w->t[i] = gln_tensor_make(dtype, rows, cols, ptrs[i]);
    return GLN_STATUS_SUCCESS;
}

void gln_weight_set_free(gln_context_t *ctx, gln_weight_set_t *w) {
    gln_ctx_free(ctx, w->mem);
    free(w->t);
    memset(w, 0, sizeof *w);
}
