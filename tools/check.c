/* `grouplin check`: a numerics self-check with a readable report.  Known conversions (values
 * from the FP8 / bf16 / E8M0 format definitions), quantize → dequantize round trips within the
 * format's rounding bound, and a tiny grouped linear forward against a float64 reference.  One
 * PASS / FAIL line per check; exit 1 if any fails. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "task.h"

typedef struct checker {
    int total, failed;
} checker_t;

static void expect(checker_t *c, int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s  ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    c->total++;
    c->failed += !ok;
}

static void expect_ok(checker_t *c, gln_status_t st, const char *what) {
    if (st != GLN_STATUS_SUCCESS) expect(c, 0, "%s: %s (%s)", what, gln_status_string(st), tool_last_error());
}

/* ---------------------------------------------------------------- known conversions */

static void check_conversions(checker_t *c) {
    const gln_dtype_t e4 = GLN_DTYPE_FP8_E4M3, e5 = GLN_DTYPE_FP8_E5M2;
    uint8_t b;
    b = gln_fp32_to_fp8(448.0f, e4);
    expect(c, b == 0x7E, "E4M3: 448 -> 0x%02X (expect 0x7E, the largest finite)", b);
    b = gln_fp32_to_fp8(1000.0f, e4);
    expect(c, b == 0x7E, "E4M3: 1000 -> 0x%02X (expect 0x7E: overflow saturates)", b);
    b = gln_fp32_to_fp8(-1e30f, e4);
    expect(c, b == 0xFE, "E4M3: -1e30 -> 0x%02X (expect 0xFE: saturates to -448)", b);
    b = gln_fp32_to_fp8(NAN, e4);
    expect(c, isnan(gln_fp8_to_fp32(b, e4)), "E4M3: NaN -> 0x%02X, decodes to NaN", b);
    b = gln_fp32_to_fp8(0.001953125f, e4);
    expect(c, b == 0x01, "E4M3: 2^-9 -> 0x%02X (expect 0x01, smallest subnormal)", b);
    b = gln_fp32_to_fp8(1.0625f, e4);
    expect(c, b == 0x38, "E4M3: 1.0625 -> 0x%02X (expect 0x38: tie rounds to even 1.0)", b);
    b = gln_fp32_to_fp8(57344.0f, e5);
    expect(c, b == 0x7B, "E5M2: 57344 -> 0x%02X (expect 0x7B, the largest finite)", b);
    b = gln_fp32_to_fp8(1e6f, e5);
    expect(c, b == 0x7B, "E5M2: 1e6 -> 0x%02X (expect 0x7B: overflow saturates)", b);
    uint16_t h = gln_fp32_to_bf16(1.00390625f);
    expect(c, h == 0x3F80, "bf16: 1 + 2^-8 -> 0x%04X (expect 0x3F80: tie to even)", h);
    h = gln_fp32_to_bf16(1.01171875f);
    expect(c, h == 0x3F82, "bf16: 1 + 3*2^-8 -> 0x%04X (expect 0x3F82: tie to even)", h);
    h = gln_fp32_to_fp16(65504.0f);
    expect(c, h == 0x7BFF, "fp16: 65504 -> 0x%04X (expect 0x7BFF)", h);
    h = gln_fp32_to_fp16(5.9604644775390625e-08f);
    expect(c, h == 0x0001, "fp16: 2^-24 -> 0x%04X (expect 0x0001, smallest subnormal)", h);

    uint8_t e = gln_e8m0_from_amax(448.0f, e4, GLN_E8M0_ROUND_UP);
    expect(c, e == 127, "E8M0 (round up): amax 448, E4M3 -> %u (expect 127: scale 2^0)", e);
    e = gln_e8m0_from_amax(500.0f, e4, GLN_E8M0_ROUND_UP);
    expect(c, e == 128, "E8M0 (round up): amax 500, E4M3 -> %u (expect 128: 500/448 -> 2^1)", e);
    e = gln_e8m0_from_amax(500.0f, e4, GLN_E8M0_ROUND_FLOOR);
    expect(c, e == 127, "E8M0 (OCP floor): amax 500, E4M3 -> %u (expect 127: 2^(8-8))", e);
    e = gln_e8m0_from_amax(1.0f, e4, GLN_E8M0_ROUND_UP);
    expect(c, e == 119, "E8M0 (round up): amax 1, E4M3 -> %u (expect 119: 1/448 -> 2^-8)", e);
    expect(c, gln_e8m0_to_fp32(127) == 1.0f && isnan(gln_e8m0_to_fp32(255)),
           "E8M0: code 127 decodes to 1, code 255 to NaN");
    float s = gln_scale_from_amax(448.0f, 448.0f, 0, 0.0f, 1.0f);
    float z = gln_scale_from_amax(0.0f, 448.0f, 0, 0.0f, 1.0f);
    expect(c, s == 1.0f && z == 1.0f, "scale from amax: 448 -> %g (expect 1), 0 -> %g (expect 1)", s, z);
}

/* ---------------------------------------------------------------- round trips */

/* Quantize x [R, C] with cfg (both copies), dequantize each copy to FP32 and return the worst
 * error as a fraction of the bound |err| <= 2^-4·|x| + 2^-10·unit (E4M3: 3 mantissa bits give a
 * relative half-ulp of 2^-4 for normals; below the normal range the spacing is 2^-9 of the
 * decode scale `unit`). */
static double round_trip(checker_t *c, gln_context_t *ctx, const gln_quant_config_t *cfg, int64_t R,
                         int64_t C, const float *x, double unit, int *same_copies) {
    gln_quant_layout_t lay;
    double worst = INFINITY;
    if (gln_quant_layout(cfg->mode, cfg->fp8_dtype, R, C, &lay) != GLN_STATUS_SUCCESS) {
        expect_ok(c, GLN_STATUS_INTERNAL_ERROR, "gln_quant_layout");
        return worst;
    }
    void *d = tool_alloc(1, lay.data_bytes + 1, "quantized data");
    void *cd = tool_alloc(1, lay.col_data_bytes + 1, "quantized data");
    void *sc = tool_alloc(1, lay.scale_bytes + 1, "scales");
    void *csc = tool_alloc(1, lay.col_scale_bytes + 1, "scales");
    float amax = 0, scale = 1, *out = tool_alloc((size_t)(2 * R * C), sizeof(float), "dequantized data");
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, R, C, (void *)x);
    gln_tensor_t q = {cfg->fp8_dtype, R, C, d, cfg->mode, sc, cd, csc, &amax, &scale};
    gln_tensor_t o0 = gln_tensor_make(GLN_DTYPE_FP32, R, C, out);
    gln_tensor_t o1 = gln_tensor_make(GLN_DTYPE_FP32, R, C, out ? out + R * C : NULL);
    gln_status_t st = GLN_STATUS_OUT_OF_MEMORY;
    if (d && cd && sc && csc && out) st = gln_quantize(ctx, cfg, &in, &q);
    if (st == GLN_STATUS_SUCCESS) st = gln_dequantize(ctx, &q, 0, &o0);
    if (st == GLN_STATUS_SUCCESS) st = gln_dequantize(ctx, &q, 1, &o1);
    if (st == GLN_STATUS_SUCCESS) {
        worst = 0;
        for (int64_t i = 0; i < 2 * R * C; i++) {
            const double ref = x[i % (R * C)], bound = 0.0625 * fabs(ref) + unit / 1024.0;
            const double err = fabs((double)out[i] - ref);
            const double r = err == 0 ? 0 : err / bound;
            worst = r > worst || isnan(r) ? r : worst;
        }
        *same_copies = memcmp(out, out + R * C, (size_t)(R * C) * sizeof(float)) == 0;
    } else {
        expect_ok(c, st, "quantize / dequantize");
    }
    free(d);
    free(cd);
    free(sc);
    free(csc);
    free(out);
    return worst;
}

static void check_round_trips(checker_t *c, gln_context_t *ctx) {
    enum { R = 64, C = 96 };
    float *x = tool_alloc((size_t)R * C, sizeof(float), "the round-trip input");
    if (!x) {
        expect_ok(c, GLN_STATUS_OUT_OF_MEMORY, "round trips");
        return;
    }
    tool_rng_t rng = tool_rng_seed(42, 0);
    float amax = 0;
    for (int i = 0; i < R * C; i++) {
        x[i] = (float)(tool_rng_normal(&rng) * (i % 7 == 0 ? 0.01 : 1.0));
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    static const struct {
        gln_scaling_mode_t mode;
        const char *name;
        double unit_mult; /* decode-scale bound as a multiple of amax/448 */
    } modes[] = {{GLN_SCALING_TENSOR, "per-tensor current scaling", 1.0},
                 {GLN_SCALING_MXFP8_1D, "MXFP8 1x32 (E8M0 scales)", 2.0},
                 {GLN_SCALING_BLOCK_1D, "FP8 block 1x128", 1.0},
                 {GLN_SCALING_BLOCK_2D, "FP8 block 128x128", 1.0}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
        cfg.mode = modes[m].mode;
        cfg.rowwise = cfg.columnwise = 1;
        int same = 0;
        double w = round_trip(c, ctx, &cfg, R, C, x, modes[m].unit_mult * amax / 448.0, &same);
        expect(c, w <= 1.0, "round trip %-28s E4M3 %dx%d: worst error %.2f of the bound", modes[m].name,
               R, C, w);
        if (modes[m].mode == GLN_SCALING_TENSOR)
            expect(c, same, "round trip %-28s rowwise and columnwise copies decode identically",
                   modes[m].name);
    }
    /* Every finite E4M3 value with amax 448: the scale is 1, so the round trip is exact. */
    float vals[254];
    int n = 0;
    for (int code = 0; code < 256; code++) {
        if ((code & 0x7F) == 0x7F) continue; /* NaN */
        vals[n++] = gln_fp8_to_fp32((uint8_t)code, GLN_DTYPE_FP8_E4M3);
    }
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.rowwise = cfg.columnwise = 1;
    int same = 0;
    double w = round_trip(c, ctx, &cfg, 2, 127, vals, 0.0, &same);
    expect(c, w == 0.0, "round trip of all 254 finite E4M3 values (amax 448): exact (worst %.3g)", w);
    free(x);
}

/* ---------------------------------------------------------------- tiny layer */

/* y = x·Wᵀ per expert for splits {5, 0, 11}: bf16 in/out, layer-owned weights read back; the
 * reference is float64 on the bf16 values.  Bound per element: one bf16 rounding of the result
 * (2^-8 relative) plus, for FP8 recipes, the quantization of both operands (2^-4 relative each,
 * plus the subnormal floor), times Σ|x·w|. */
static void check_layer(checker_t *c, gln_context_t *ctx, const tool_recipe_t *rec) {
    enum { E = 3, K_IN = 40, K_OUT = 24, M = 16 };
    const int64_t splits[E] = {5, 0, 11}, starts[E] = {0, 5, 5};
    uint16_t x[M * K_IN], y[M * K_OUT];
    tool_rng_t rng = tool_rng_seed(7, 1);
    double amax_x = 0;
    for (int i = 0; i < M * K_IN; i++) {
        x[i] = gln_fp32_to_bf16((float)tool_rng_normal(&rng));
        amax_x = fmax(amax_x, fabs(gln_bf16_to_fp32(x[i])));
    }
    gln_grouped_linear_config_t cfg = GLN_GROUPED_LINEAR_CONFIG_INIT;
    cfg.num_experts = E;
    cfg.in_features = K_IN;
    cfg.out_features = K_OUT;
    cfg.bias = 0;
    cfg.recipe = rec->recipe;
    cfg.weights_require_grad = 0;
    gln_grouped_linear_t *layer = NULL;
    gln_status_t st = gln_grouped_linear_create(ctx, &cfg, &layer);
    gln_tensor_t tx = gln_tensor_make(GLN_DTYPE_BF16, M, K_IN, x), ty = gln_tensor_make(GLN_DTYPE_BF16, M, K_OUT, y);
    gln_grouped_linear_forward_args_t fa = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    fa.x = &tx;
    fa.m_splits = splits;
    fa.y = &ty;
    fa.input_requires_grad = 0;
    for (int i = 0; i < M * K_OUT; i++) y[i] = 0x7FC0; /* NaN: every element must be written */
    if (st == GLN_STATUS_SUCCESS) st = gln_grouped_linear_forward(layer, &fa, NULL);
    double worst = 0;
    for (int e = 0; st == GLN_STATUS_SUCCESS && e < E; e++) {
        void *wp = NULL, *bp = NULL;
        st = gln_grouped_linear_weight(layer, e, &wp, &bp);
        if (st != GLN_STATUS_SUCCESS) break;
        const uint16_t *w = wp;
        double amax_w = 0;
        for (int i = 0; i < K_OUT * K_IN; i++) amax_w = fmax(amax_w, fabs(gln_bf16_to_fp32(w[i])));
        const double q = rec->recipe == GLN_RECIPE_NONE ? 0.0 : 0.125 + 1.0 / 256;
        const double floor_ = rec->recipe == GLN_RECIPE_NONE ? 0.0 : K_IN * 2.0 * amax_x * amax_w / (448.0 * 512.0);
        for (int64_t r = starts[e]; r < starts[e] + splits[e]; r++)
            for (int n = 0; n < K_OUT; n++) {
                double ref = 0, mag = 0;
                for (int k = 0; k < K_IN; k++) {
                    const double p = (double)gln_bf16_to_fp32(x[r * K_IN + k]) * gln_bf16_to_fp32(w[n * K_IN + k]);
                    ref += p;
                    mag += fabs(p);
                }
                const double got = gln_bf16_to_fp32(y[r * K_OUT + n]);
                /* + FP32 accumulation: K_IN roundings of at most 2^-24 of Σ|x·w| */
                const double bound = fabs(ref) / 256.0 + (q + K_IN * 0x1p-24) * mag + floor_ + 1e-30;
                const double ratio = fabs(got - ref) / bound;
                worst = ratio > worst || isnan(ratio) ? ratio : worst;
            }
    }
    if (st != GLN_STATUS_SUCCESS)
        expect_ok(c, st, "tiny layer");
    else
        expect(c, worst <= 1.0, "tiny layer %-12s E=3 splits {5,0,11} %dx%d: worst error %.2f of the bound",
               rec->name, K_IN, K_OUT, worst);
    gln_grouped_linear_destroy(layer);
}

/* ---------------------------------------------------------------- router */

static void check_router(checker_t *c, gln_context_t *ctx) {
    const float logits[2 * 4] = {0, 0, 0, 0, 1, 3, 3, -1};
    int32_t ex[4] = {-1, -1, -1, -1};
    float g[4] = {0};
    gln_status_t st = gln_moe_router_forward(ctx, 2, 4, 2, logits, ex, g);
    if (st != GLN_STATUS_SUCCESS) {
        expect_ok(c, st, "router");
        return;
    }
    expect(c, ex[0] == 0 && ex[1] == 1 && ex[2] == 1 && ex[3] == 2 && g[0] == 0.5f && g[1] == 0.5f &&
                  g[2] == 0.5f && g[3] == 0.5f,
           "router top-2: ties go to the lower expert, equal gates are exactly 1/2");
}

static const char help[] =
    "usage: grouplin check\n"
    "\n"
    "Numerics self-check: known FP8 / bf16 / fp16 / E8M0 conversions, quantize -> dequantize\n"
    "round trips for every scaling mode within the format's rounding bound, a tiny grouped\n"
    "linear forward against a float64 reference (bf16, fp8-current, mxfp8) and the router's\n"
    "tie rule.  Prints PASS / FAIL per check.\n"
    "\n"
    "options:\n"
    "  -h, --help   this help\n"
    "\n"
    "exit status: 0 all checks passed, 1 a check failed, 2 usage error\n";

static int no_options(int code, const char *arg, void *user) { return CLI_OK; }

int cmd_check(int argc, char **argv) {
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int shown = 0;
    int rc = opt_parse("check", argc, argv, longopts, help, no_options, NULL, &shown);
    if (rc != CLI_OK || shown) return rc;
    checker_t c = {0, 0};
    gln_context_t *ctx = NULL;
    gln_status_t st = gln_context_create(NULL, &ctx);
    if (st != GLN_STATUS_SUCCESS) {
        fprintf(stderr, "grouplin check: %s\n", gln_last_error());
        return CLI_FAIL;
    }
    printf("grouplin check: numerics self-check (cpu backend)\n\n");
    check_conversions(&c);
    check_round_trips(&c, ctx);
    check_layer(&c, ctx, tool_recipe_find("bf16"));
    check_layer(&c, ctx, tool_recipe_find("fp8-current"));
    check_layer(&c, ctx, tool_recipe_find("mxfp8"));
    check_router(&c, ctx);
    gln_context_destroy(ctx);
    printf("\n%d checks, %d failed: %s\n", c.total, c.failed, c.failed ? "FAIL" : "PASS");
    return c.failed ? CLI_FAIL : CLI_OK;
}
