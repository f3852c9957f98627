/* Float64 reference of the grouped linear layer (see layer_ref.h). */
#include "layer_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

void gln_layer_ref_spec_init(gln_layer_ref_spec_t *spec, const gln_grouped_linear_config_t *cfg) {
    memset(spec, 0, sizeof *spec);
    spec->recipe = cfg->recipe;
    spec->fp8_format = cfg->fp8_format;
    if (spec->fp8_format == GLN_FP8_FORMAT_RECIPE_DEFAULT) /* TE's default per recipe */
        spec->fp8_format = cfg->recipe == GLN_RECIPE_FP8_DELAYED || cfg->recipe == GLN_RECIPE_FP8_CURRENT
                               ? GLN_FP8_FORMAT_HYBRID
                               : GLN_FP8_FORMAT_E4M3;
    spec->power_2_scales = cfg->power_2_scales;
    spec->block_fp32_scales = cfg->block_fp32_scales;
    spec->amax_epsilon = cfg->amax_epsilon;
    spec->e8m0_rounding = cfg->e8m0_rounding;
    spec->num_experts = cfg->num_experts;
    for (int i = 0; i < 3 * GLN_REF_MAX_EXPERTS; i++) spec->fwd_scale[i] = 1.0f;
    for (int i = 0; i < 2 * GLN_REF_MAX_EXPERTS; i++) spec->bwd_scale[i] = 1.0f;
    for (int i = 0; i < GLN_REF_MAX_EXPERTS; i++) spec->w_bwd_scale[i] = 1.0f;
}

static gln_status_t ref_read_scales(gln_grouped_linear_t *layer, int backward, int32_t want,
                                    float *dst, int32_t first, int32_t stride, int32_t n) {
    float *scale = NULL, *hist = NULL;
    int32_t slots = 0, len = 0;
    gln_status_t st = gln_grouped_linear_fp8_state(layer, backward, &scale, &hist, &slots, &len);
    if (st != GLN_STATUS_SUCCESS) return st;
    if (slots < want || !scale) return GLN_STATUS_INTERNAL_ERROR;
    for (int32_t i = 0; i < n; i++) dst[i] = scale[first + i * stride];
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_layer_ref_capture_w_bwd_scales(gln_layer_ref_spec_t *spec,
                                                gln_grouped_linear_t *layer) {
    int32_t n = spec->num_experts;
    if (n > GLN_REF_MAX_EXPERTS) return GLN_STATUS_INTERNAL_ERROR;
    return ref_read_scales(layer, 0, 3 * n, spec->w_bwd_scale, 1, 3, n);
}

gln_status_t gln_layer_ref_capture_scales(gln_layer_ref_spec_t *spec, gln_grouped_linear_t *layer) {
    int32_t n = spec->num_experts;
    if (n > GLN_REF_MAX_EXPERTS) return GLN_STATUS_INTERNAL_ERROR;
    gln_status_t st = ref_read_scales(layer, 0, 3 * n, spec->fwd_scale, 0, 1, 3 * n);
    if (st == GLN_STATUS_SUCCESS) st = ref_read_scales(layer, 1, 2 * n, spec->bwd_scale, 0, 1, 2 * n);
    if (st == GLN_STATUS_SUCCESS) st = gln_layer_ref_capture_w_bwd_scales(spec, layer);
    return st;
}

static gln_scaling_mode_t ref_mode(gln_recipe_t recipe, gln_ref_role_t role) {
    switch (recipe) {
    case GLN_RECIPE_FP8_DELAYED:
    case GLN_RECIPE_FP8_CURRENT: return GLN_SCALING_TENSOR;
    case GLN_RECIPE_MXFP8: return GLN_SCALING_MXFP8_1D;
    case GLN_RECIPE_FP8_BLOCK: return role == GLN_REF_W ? GLN_SCALING_BLOCK_2D : GLN_SCALING_BLOCK_1D;
    default: return GLN_SCALING_NONE;
    }
}

gln_quant_config_t gln_layer_ref_quant_config(const gln_layer_ref_spec_t *spec, gln_ref_role_t role) {
    gln_quant_config_t q = GLN_QUANT_CONFIG_INIT;
    if (role == GLN_REF_W_BWD) role = GLN_REF_W;
    q.mode = ref_mode(spec->recipe, role);
    q.fp8_dtype = (role == GLN_REF_DY && spec->fp8_format == GLN_FP8_FORMAT_HYBRID)
                      ? GLN_DTYPE_FP8_E5M2
                      : GLN_DTYPE_FP8_E4M3;
    q.rowwise = 1;
    q.columnwise = 1;
    q.delayed = spec->recipe == GLN_RECIPE_FP8_DELAYED;
    q.amax_epsilon = spec->amax_epsilon;
    if (spec->recipe == GLN_RECIPE_FP8_CURRENT) q.power_2_scale = spec->power_2_scales;
    if (spec->recipe == GLN_RECIPE_FP8_BLOCK) q.power_2_scale = !spec->block_fp32_scales;
    q.e8m0_rounding = spec->e8m0_rounding;
    return q;
}

static float ref_delayed_scale(const gln_layer_ref_spec_t *spec, gln_ref_role_t role, int32_t e) {
    switch (role) {
    case GLN_REF_X: return spec->fwd_scale[3 * e];
    case GLN_REF_W: return spec->fwd_scale[3 * e + 1];
    case GLN_REF_W_BWD: return spec->w_bwd_scale[e];
    default: return spec->bwd_scale[2 * e];
    }
}

/* Per-tensor FP8: raw FP8 values (exact) times the FP32 decode scale, in float64 (the
 * GEMM multiplies raw values and applies scale_inv products, so no FP32 rounding here). */
static void ref_dequant_tensor(const gln_tensor_t *q, int columnwise, double *out) {
    int64_t R = q->rows, C = q->cols;
    const uint8_t *d = columnwise ? q->col_data : q->data;
    double s = columnwise ? ((const float *)q->col_scale_inv)[0] : ((const float *)q->scale_inv)[0];
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            uint8_t b = columnwise ? d[c * R + r] : d[r * C + c];
            out[r * C + c] = (double)gln_fp8_to_fp32(b, q->dtype) * s;
        }
}

gln_status_t gln_layer_ref_operand(gln_context_t *ctx, const gln_layer_ref_spec_t *spec,
                                   gln_ref_role_t role, int32_t expert, const void *hp,
                                   gln_dtype_t dtype, int64_t rows, int64_t cols, int columnwise,
                                   gln_dtype_t cast_dtype, double *out) {
    size_t n = (size_t)(rows * cols);
    if (n == 0) return GLN_STATUS_SUCCESS;
    if (spec->recipe == GLN_RECIPE_NONE) {
        for (size_t j = 0; j < n; j++) out[j] = gln_round_to(gln_load(hp, dtype, j), cast_dtype);
        return GLN_STATUS_SUCCESS;
    }
    gln_quant_config_t qc = gln_layer_ref_quant_config(spec, role);
    gln_quant_layout_t lay;
    gln_status_t st = gln_quant_layout(qc.mode, qc.fp8_dtype, rows, cols, &lay);
    if (st != GLN_STATUS_SUCCESS) return st;
    float scale = ref_delayed_scale(spec, role, expert), amax = 0.0f;
    gln_tensor_t in = gln_tensor_make(dtype, rows, cols, (void *)hp);
    gln_tensor_t q = gln_tensor_make(qc.fp8_dtype, rows, cols, NULL);
    q.scaling = qc.mode;
    q.data = calloc(1, lay.data_bytes + 1);
    q.col_data = calloc(1, lay.col_data_bytes + 1);
    q.scale_inv = calloc(1, lay.scale_bytes + 4);
    q.col_scale_inv = calloc(1, lay.col_scale_bytes + 4);
    q.scale = &scale;
    q.amax = &amax;
    float *deq = malloc(n * sizeof(float));
    if (!q.data || !q.col_data || !q.scale_inv || !q.col_scale_inv || !deq) {
        st = GLN_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    st = gln_quantize(ctx, &qc, &in, &q);
    if (st != GLN_STATUS_SUCCESS) goto done;
    if (qc.mode == GLN_SCALING_TENSOR) {
        ref_dequant_tensor(&q, columnwise, out);
    } else {
        /* MXFP8 and power-of-two block scales: the FP32 dequantization is exact. */
        gln_tensor_t f = gln_tensor_make(GLN_DTYPE_FP32, rows, cols, deq);
        st = gln_dequantize(ctx, &q, columnwise, &f);
        if (st != GLN_STATUS_SUCCESS) goto done;
        for (size_t j = 0; j < n; j++) out[j] = deq[j];
    }
done:
    free(q.data);
    free(q.col_data);
    free(q.scale_inv);
    free(q.col_scale_inv);
    free(deq);
    return st;
}

int64_t gln_layer_ref_total_rows(int32_t num, const int64_t *splits) {
    int64_t m = 0;
    for (int32_t i = 0; i < num; i++) m += splits[i];
    return m;
}

void gln_layer_ref_out_free(gln_layer_ref_out_t *out) {
    double **p[] = {&out->y, &out->y_err, &out->dx, &out->dx_err,
                    &out->dw, &out->dw_err, &out->db, &out->db_err};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        free(*p[i]);
        *p[i] = NULL;
    }
}

static double *ref_zeros(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

/* Dot-product error bound of an FP32 implementation: (k + extra)·u·Σ|terms|. */
static double ref_bound(int64_t k, double abs_sum) {
    return (double)(k + GLN_REF_EXTRA_OPS) * GLN_REF_U_FP32 * abs_sum;
}

/* The dequantized operands of one expert. */
typedef struct ref_expert_ops {
    double *xr, *xc, *wr, *wc, *dyr, *dyc;
} ref_expert_ops_t;

static void ref_ops_free(ref_expert_ops_t *o) {
    free(o->xr);
    free(o->xc);
    free(o->wr);
    free(o->wc);
    free(o->dyr);
    free(o->dyc);
}

static gln_status_t ref_ops_make(gln_context_t *ctx, const gln_layer_ref_spec_t *spec,
                                 const gln_layer_ref_inputs_t *in, int32_t e, int64_t r0,
                                 ref_expert_ops_t *o) {
    int64_t m = in->splits[e], ki = in->k_in, ko = in->k_out;
    size_t xs = gln_dtype_size(in->act_dtype);
    const char *x = (const char *)in->x + (size_t)(r0 * ki) * xs;
    const void *wb = in->w_bwd ? in->w_bwd[e] : in->w_fwd[e];
    memset(o, 0, sizeof *o);
    o->xr = ref_zeros((size_t)(m * ki));
    o->xc = ref_zeros((size_t)(m * ki));
    o->wr = ref_zeros((size_t)(ko * ki));
    o->wc = ref_zeros((size_t)(ko * ki));
    o->dyr = ref_zeros((size_t)(m * ko));
    o->dyc = ref_zeros((size_t)(m * ko));
    if (!o->xr || !o->xc || !o->wr || !o->wc || !o->dyr || !o->dyc) return GLN_STATUS_OUT_OF_MEMORY;
    gln_dtype_t a = in->act_dtype;
    gln_status_t st;
    if ((st = gln_layer_ref_operand(ctx, spec, GLN_REF_X, e, x, a, m, ki, 0, a, o->xr))) return st;
    if ((st = gln_layer_ref_operand(ctx, spec, GLN_REF_X, e, x, a, m, ki, 1, a, o->xc))) return st;
    if ((st = gln_layer_ref_operand(ctx, spec, GLN_REF_W, e, in->w_fwd[e], in->w_dtype, ko, ki, 0,
                                    a, o->wr)))
        return st;
    if (!in->dy) return GLN_STATUS_SUCCESS;
    const char *dy = (const char *)in->dy + (size_t)(r0 * ko) * xs;
    /* The dgrad's weight: the forward's quantization unless the weights are re-materialized. */
    gln_ref_role_t wrole = in->w_bwd ? GLN_REF_W_BWD : GLN_REF_W;
    if ((st = gln_layer_ref_operand(ctx, spec, wrole, e, wb, in->w_dtype, ko, ki, 1, a, o->wc)))
        return st;
    if ((st = gln_layer_ref_operand(ctx, spec, GLN_REF_DY, e, dy, a, m, ko, 0, a, o->dyr))) return st;
    return gln_layer_ref_operand(ctx, spec, GLN_REF_DY, e, dy, a, m, ko, 1, a, o->dyc);
}

/* bias_bf16: FP8 recipe with FP32 activations — the bias is rounded to bf16 first (as TE's FP8
 * GEMM takes a 16-bit bias). */
static void ref_fprop(const gln_layer_ref_inputs_t *in, int32_t e, int64_t r0,
                      const ref_expert_ops_t *o, int bias_bf16, gln_layer_ref_out_t *out) {
    int64_t m = in->splits[e], ki = in->k_in, ko = in->k_out;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < ko; c++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < ki; k++) {
                double p = o->xr[r * ki + k] * o->wr[c * ki + k];
                s += p;
                a += fabs(p);
            }
            if (in->bias) {
                double b = gln_load(in->bias[e], in->bias_dtype, (size_t)c);
                if (bias_bf16) b = gln_round_to(b, GLN_DTYPE_BF16);
                s += b;
                a += fabs(b);
            }
            out->y[(r0 + r) * ko + c] = s;
            out->y_err[(r0 + r) * ko + c] = ref_bound(ki, a);
        }
}

static void ref_dgrad(const gln_layer_ref_inputs_t *in, int64_t m, int64_t r0,
                      const ref_expert_ops_t *o, gln_layer_ref_out_t *out) {
    int64_t ki = in->k_in, ko = in->k_out;
    for (int64_t r = 0; r < m; r++)
        for (int64_t k = 0; k < ki; k++) {
            double s = 0, a = 0;
            for (int64_t c = 0; c < ko; c++) {
                double p = o->dyr[r * ko + c] * o->wc[c * ki + k];
                s += p;
                a += fabs(p);
            }
            out->dx[(r0 + r) * ki + k] = s;
            out->dx_err[(r0 + r) * ki + k] = ref_bound(ko, a);
        }
}

static void ref_wgrad_dbias(const gln_layer_ref_inputs_t *in, int32_t e, int64_t r0,
                            const ref_expert_ops_t *o, gln_layer_ref_out_t *out) {
    int64_t m = in->splits[e], ki = in->k_in, ko = in->k_out;
    double *dw = out->dw + (size_t)e * (size_t)(ko * ki), *dwe = out->dw_err + (size_t)e * (size_t)(ko * ki);
    for (int64_t c = 0; c < ko; c++)
        for (int64_t k = 0; k < ki; k++) {
            double s = 0, a = 0;
            for (int64_t r = 0; r < m; r++) {
                double p = o->dyc[r * ko + c] * o->xc[r * ki + k];
                s += p;
                a += fabs(p);
            }
            dw[c * ki + k] = s;
            dwe[c * ki + k] = ref_bound(m, a);
        }
    for (int64_t c = 0; c < ko; c++) {
        double s = 0, a = 0;
        for (int64_t r = 0; r < m; r++) {
            double v = gln_load(in->dy, in->act_dtype, (size_t)((r0 + r) * ko + c));
            s += v;
            a += fabs(v);
        }
        out->db[e * ko + c] = s;
        out->db_err[e * ko + c] = ref_bound(m, a);
    }
}

gln_status_t gln_layer_ref_run(gln_context_t *ctx, const gln_layer_ref_spec_t *spec,
                               const gln_layer_ref_inputs_t *in, gln_layer_ref_out_t *out) {
    int64_t M = gln_layer_ref_total_rows(in->num, in->splits), ki = in->k_in, ko = in->k_out;
    memset(out, 0, sizeof *out);
    out->rows = M;
    out->y = ref_zeros((size_t)(M * ko));
    out->y_err = ref_zeros((size_t)(M * ko));
    out->dx = ref_zeros((size_t)(M * ki));
    out->dx_err = ref_zeros((size_t)(M * ki));
    out->dw = ref_zeros((size_t)(in->num * ko * ki));
    out->dw_err = ref_zeros((size_t)(in->num * ko * ki));
    out->db = ref_zeros((size_t)(in->num * ko));
    out->db_err = ref_zeros((size_t)(in->num * ko));
    if (!out->y || !out->y_err || !out->dx || !out->dx_err || !out->dw || !out->dw_err ||
        !out->db || !out->db_err) {
        gln_layer_ref_out_free(out);
        return GLN_STATUS_OUT_OF_MEMORY;
    }
    int64_t r0 = 0;
    for (int32_t e = 0; e < in->num; e++) {
        int64_t m = in->splits[e];
        if (m > 0) {
            ref_expert_ops_t o;
            gln_status_t st = ref_ops_make(ctx, spec, in, e, r0, &o);
            if (st != GLN_STATUS_SUCCESS) {
                ref_ops_free(&o);
                gln_layer_ref_out_free(out);
                return st;
            }
            ref_fprop(in, e, r0, &o,
                      spec->recipe != GLN_RECIPE_NONE && in->act_dtype == GLN_DTYPE_FP32, out);
            if (in->dy) {
                ref_dgrad(in, m, r0, &o, out);
                ref_wgrad_dbias(in, e, r0, &o, out);
            }
            ref_ops_free(&o);
        }
        r0 += m;
    }
    return GLN_STATUS_SUCCESS;
}

double gln_layer_ref_unit(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_BF16: return GLN_REF_U_BF16;
    case GLN_DTYPE_FP16: return GLN_REF_U_FP16;
    default: return GLN_REF_U_FP32;
    }
}

double gln_layer_ref_tiny(gln_dtype_t dtype) {
    switch (dtype) {
    case GLN_DTYPE_BF16: return GLN_REF_TINY_BF16;
    case GLN_DTYPE_FP16: return GLN_REF_TINY_FP16;
    default: return GLN_REF_TINY_FP32;
    }
}

double gln_layer_ref_check(const char *what, const void *got, gln_dtype_t dtype, const double *ref,
                           const double *err, size_t count) {
    double u = gln_layer_ref_unit(dtype), tiny = gln_layer_ref_tiny(dtype), worst = 0.0;
    int reported = 0;
    for (size_t j = 0; j < count; j++) {
        double g = gln_load(got, dtype, j), r = ref[j], e = err ? err[j] : 0.0;
        double tol = u * (fabs(r) + e) + e + tiny;
        double frac = isnan(g) || isnan(r) ? INFINITY : fabs(g - r) / tol;
        if (frac > worst) worst = frac;
        if (frac > 1.0 && reported < 4) {
            reported++;
            gln_test_fail_at(__FILE__, __LINE__, "%s[%zu]: got %.9g, want %.9g (tol %.3g, %.2fx)",
                             what, j, g, r, tol, frac);
        }
    }
    return worst;
}

void gln_layer_ref_fill_normal(void *buf, gln_dtype_t dtype, size_t count, double stddev,
                               uint64_t seed) {
    gln_rng_t rng = gln_rng_seed(seed);
    for (size_t j = 0; j < count; j++) gln_store(buf, dtype, j, stddev * gln_rng_normal(&rng));
}
