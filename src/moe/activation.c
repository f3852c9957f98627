/* Expert activations: SwiGLU ([a | b] → silu(a)·b) and GELU (tanh approximation), forward and
 * backward.  Host memory; FP32 math per element with one rounding to the output dtype. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_convert.h"
#include "common/error.h"
#include "moe/moe_check.h"

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

static float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }

static float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_C * (x + GELU_A * x * x * x)));
}

static float gelu_grad(float x) {
    float t = tanhf(GELU_C * (x + GELU_A * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
}

/* Shapes: SwiGLU in [R, 2H] / out [R, H]; GELU in [R, H] / out [R, H]. */
static gln_status_t act_check(const char *fn, gln_context_t *ctx, gln_activation_t act,
                              const gln_tensor_t *in, int64_t *width) {
    GLN_TRY(gln_moe_check_ctx(fn, ctx));
    GLN_REQUIRE_ARG(act == GLN_ACT_SWIGLU || act == GLN_ACT_GELU,
                    "%s: act %d is not an activation (0 = swiglu, 1 = gelu)", fn, (int)act);
    GLN_REQUIRE_NOT_NULL(fn, in);
    GLN_REQUIRE_ARG(act != GLN_ACT_SWIGLU || in->cols % 2 == 0,
                    "%s: in->cols %lld must be even for swiglu ([a | b] halves)", fn,
                    (long long)in->cols);
    GLN_TRY(gln_moe_check_tensor(fn, "in", in, in->rows, in->cols));
    *width = act == GLN_ACT_SWIGLU ? in->cols / 2 : in->cols;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_activation_forward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                    gln_tensor_t *out) {
    static const char *fn = "gln_activation_forward";
    int64_t h = 0;
    GLN_TRY(act_check(fn, ctx, act, in, &h));
    GLN_TRY(gln_moe_check_tensor(fn, "out", out, in->rows, h));
    if (in->rows == 0 || h == 0) return GLN_STATUS_SUCCESS;
    float *row;
    GLN_TRY(gln_moe_scratch(fn, h, &row));
    const size_t out_es = gln_dtype_size(out->dtype);
    for (int64_t r = 0; r < in->rows; r++) {
        const size_t base = (size_t)(r * in->cols);
        for (int64_t c = 0; c < h; c++) {
            float a = gln_cpu_load(in->data, in->dtype, base + (size_t)c);
            if (act == GLN_ACT_GELU) {
                row[c] = gelu_f(a);
            } else {
                float b = gln_cpu_load(in->data, in->dtype, base + (size_t)(h + c));
                row[c] = a * sigmoidf(a) * b;
            }
        }
        gln_cpu_narrow(row, out->dtype, (size_t)h, (char *)out->data + (size_t)(r * h) * out_es);
    }
    free(row);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_activation_backward(gln_context_t *ctx, gln_activation_t act, const gln_tensor_t *in,
                                     const gln_tensor_t *dout, gln_tensor_t *din) {
    static const char *fn = "gln_activation_backward";
    int64_t h = 0;
    GLN_TRY(act_check(fn, ctx, act, in, &h));
    GLN_TRY(gln_moe_check_tensor(fn, "dout", dout, in->rows, h));
    GLN_TRY(gln_moe_check_tensor(fn, "din", din, in->rows, in->cols));
    if (in->rows == 0 || in->cols == 0) return GLN_STATUS_SUCCESS;
    float *row;
    GLN_TRY(gln_moe_scratch(fn, in->cols, &row));
    const size_t din_es = gln_dtype_size(din->dtype);
    for (int64_t r = 0; r < in->rows; r++) {
        const size_t base = (size_t)(r * in->cols);
        for (int64_t c = 0; c < h; c++) {
            float a = gln_cpu_load(in->data, in->dtype, base + (size_t)c);
            float d = gln_cpu_load(dout->data, dout->dtype, (size_t)(r * h + c));
            if (act == GLN_ACT_GELU) {
                row[c] = d * gelu_grad(a);
            } else {
                /* d silu(a)/da = s + a·s·(1 - s) */
                float b = gln_cpu_load(in->data, in->dtype, base + (size_t)(h + c));
                float s = sigmoidf(a);
                row[c] = d * b * (s + a * s * (1.0f - s));
                row[h + c] = d * a * s;
            }
        }
        gln_cpu_narrow(row, din->dtype, (size_t)in->cols, (char *)din->data + base * din_es);
    }
    free(row);
    return GLN_STATUS_SUCCESS;
}
