/* Running a public call from a gln_op_query_t (see op_probe.h). */
#include "op_probe.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Pool regions: every tensor of a probe fits one (the largest: MXFP8 scale grids of 32 x 32,
 * 512 bytes per copy; two grouped members 1 KiB; fp32 [32, 64] 8 KiB). */
#define REGION ((size_t)64 << 10)
#define OUT_REGIONS 6
#define DIM 32
#define TOKENS 4
#define TOPK 2

struct gln_test_probe {
    gln_context_t *ctx;
    void *in;  /* one zeroed region, shared by every input */
    void *out; /* OUT_REGIONS regions, one per output buffer */
};

static void *out_region(gln_test_probe_t *p, int i) { return (char *)p->out + (size_t)i * REGION; }

static int zero_fill(gln_context_t *ctx, void *dst, size_t bytes) {
    void *z = calloc(1, bytes);
    int ok = z && gln_memcpy(ctx, dst, z, bytes, GLN_COPY_HOST_TO_BACKEND) == GLN_STATUS_SUCCESS;
    free(z);
    return ok;
}

gln_test_probe_t *gln_test_probe_create(gln_context_t *ctx) {
    gln_test_probe_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->ctx = ctx;
    if (gln_malloc(ctx, REGION, &p->in) != GLN_STATUS_SUCCESS ||
        gln_malloc(ctx, REGION * OUT_REGIONS, &p->out) != GLN_STATUS_SUCCESS || !zero_fill(ctx, p->in, REGION) ||
        !zero_fill(ctx, p->out, REGION * OUT_REGIONS)) {
        fprintf(stderr, "op probe: cannot set up the pools: %s\n", gln_last_error());
        gln_test_probe_destroy(p);
        return NULL;
    }
    return p;
}

void gln_test_probe_destroy(gln_test_probe_t *p) {
    if (!p) return;
    if (p->in) gln_free(p->ctx, p->in);
    if (p->out) gln_free(p->ctx, p->out);
    free(p);
}

/* A tensor of the query's dtype / mode; quantized ones get every copy, scale, amax and scale. */
static gln_tensor_t tensor_at(void *base, gln_dtype_t dt, gln_scaling_mode_t sc, int64_t rows, int64_t cols,
                              int separate) {
    gln_tensor_t t = gln_tensor_make(dt, rows, cols, base);
    t.scaling = sc;
    if (sc != GLN_SCALING_NONE) {
        char *b = base;
        /* outputs: the copies and scales in separate quarters of their region */
        t.col_data = separate ? b + REGION / 4 : b;
        t.scale_inv = separate ? b + REGION / 2 : b;
        t.col_scale_inv = separate ? b + 3 * (REGION / 4) : b;
        t.amax = (float *)(separate ? b + 3 * (REGION / 4) + REGION / 8 : b);
        t.scale = t.amax + 4;
    }
    return t;
}

static gln_tensor_t in_t(gln_test_probe_t *p, gln_dtype_t dt, gln_scaling_mode_t sc, int64_t rows, int64_t cols) {
    return tensor_at(p->in, dt, sc, rows, cols, 0);
}

static gln_tensor_t out_t(gln_test_probe_t *p, int region, gln_dtype_t dt, gln_scaling_mode_t sc, int64_t rows,
                          int64_t cols) {
    return tensor_at(out_region(p, region), dt, sc, rows, cols, 1);
}

static const int64_t two_splits[2] = {DIM / 2, DIM / 2};

static gln_grouped_tensor_t grouped(gln_tensor_t packed) {
    gln_grouped_tensor_t g;
    memset(&g, 0, sizeof g);
    g.num = 2;
    g.splits = two_splits;
    g.splits_on_backend = 0;
    g.packed = packed;
    return g;
}

static gln_status_t run_quantize(gln_test_probe_t *p, const gln_op_query_t *q, int grouped_call) {
    gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
    cfg.mode = q->out_scaling;
    cfg.fp8_dtype = q->out_dtype;
    cfg.rowwise = 1;
    cfg.columnwise = 1;
    gln_tensor_t in = in_t(p, q->a_dtype, q->a_scaling, DIM, DIM);
    gln_tensor_t out = out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM);
    if (!grouped_call) return gln_quantize(p->ctx, &cfg, &in, &out);
    gln_grouped_tensor_t gi = grouped(in), go = grouped(out);
    return gln_grouped_quantize(p->ctx, &cfg, &gi, &go);
}

static gln_status_t run_grouped_gemm(gln_test_probe_t *p, const gln_op_query_t *q) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = q->layout;
    gln_tensor_t alist[2] = {in_t(p, q->a_dtype, q->a_scaling, DIM, DIM), in_t(p, q->a_dtype, q->a_scaling, DIM, DIM)};
    gln_tensor_t dlist[2] = {out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM),
                             out_t(p, 1, q->out_dtype, q->out_scaling, DIM, DIM)};
    gln_grouped_tensor_t ga = grouped(in_t(p, q->a_dtype, q->a_scaling, DIM, DIM));
    gln_grouped_tensor_t gb = grouped(in_t(p, q->b_dtype, q->b_scaling, DIM, DIM));
    gln_grouped_tensor_t gd = grouped(out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM));
    a.b = &gb;
    if (q->layout == GLN_LAYOUT_NT) {
        a.a_grouped = &ga;
        a.d_list = dlist;
    } else {
        a.a_list = alist;
        a.d_grouped = &gd;
    }
    return gln_grouped_gemm(p->ctx, &a);
}

static gln_status_t run_moe(gln_test_probe_t *p, const gln_op_query_t *q) {
    gln_context_t *ctx = p->ctx;
    const int64_t T = TOKENS, P = TOKENS * TOPK, H = DIM;
    const float *fin = p->in;
    const int32_t *iin = p->in;
    const int64_t *row_of = p->in; /* zeros: every pair on row 0, a valid row */
    float *f0 = out_region(p, 0), *f1 = out_region(p, 1);
    switch (q->op) {
    case GLN_OP_MOE_ROUTER_FORWARD: return gln_moe_router_forward(ctx, T, 4, TOPK, fin, (int32_t *)f0, f1);
    case GLN_OP_MOE_ROUTER_BACKWARD: return gln_moe_router_backward(ctx, T, 4, TOPK, fin, iin, fin, f0);
    case GLN_OP_MOE_PERMUTE_PLAN:
        return gln_moe_permute_plan(ctx, T, 4, TOPK, iin, (int64_t *)f0, (int64_t *)f1);
    case GLN_OP_MOE_PERMUTE: {
        gln_tensor_t x = in_t(p, q->a_dtype, q->a_scaling, T, H);
        gln_tensor_t xp = out_t(p, 0, q->out_dtype, q->out_scaling, P, H);
        return gln_moe_permute(ctx, T, TOPK, row_of, &x, &xp);
    }
    case GLN_OP_MOE_PERMUTE_BACKWARD: {
        gln_tensor_t dxp = in_t(p, q->a_dtype, q->a_scaling, P, H);
        gln_tensor_t dx = out_t(p, 0, q->out_dtype, q->out_scaling, T, H);
        return gln_moe_permute_backward(ctx, T, TOPK, row_of, &dxp, &dx);
    }
    case GLN_OP_MOE_UNPERMUTE: {
        gln_tensor_t yp = in_t(p, q->a_dtype, q->a_scaling, P, H);
        gln_tensor_t y = out_t(p, 0, q->out_dtype, q->out_scaling, T, H);
        return gln_moe_unpermute(ctx, T, TOPK, row_of, fin, &yp, &y);
    }
    case GLN_OP_MOE_UNPERMUTE_BACKWARD: {
        gln_tensor_t yp = in_t(p, q->a_dtype, q->a_scaling, P, H), dy = in_t(p, q->b_dtype, q->b_scaling, T, H);
        gln_tensor_t dyp = out_t(p, 0, q->out_dtype, q->out_scaling, P, H);
        return gln_moe_unpermute_backward(ctx, T, TOPK, row_of, fin, &yp, &dy, &dyp, f1);
    }
    case GLN_OP_ACTIVATION_FORWARD: {
        gln_tensor_t in = in_t(p, q->a_dtype, q->a_scaling, T, 2 * H);
        gln_tensor_t out = out_t(p, 0, q->out_dtype, q->out_scaling, T, H);
        return gln_activation_forward(ctx, GLN_ACT_SWIGLU, &in, &out);
    }
    case GLN_OP_ACTIVATION_BACKWARD: {
        gln_tensor_t in = in_t(p, q->a_dtype, q->a_scaling, T, 2 * H), dout = in_t(p, q->b_dtype, q->b_scaling, T, H);
        gln_tensor_t din = out_t(p, 0, q->out_dtype, q->out_scaling, T, 2 * H);
        return gln_activation_backward(ctx, GLN_ACT_SWIGLU, &in, &dout, &din);
    }
    case GLN_OP_ACTIVATION_FORWARD_QUANTIZE: {
        gln_quant_config_t cfg = GLN_QUANT_CONFIG_INIT;
        cfg.mode = q->out_scaling;
        cfg.fp8_dtype = q->out_dtype;
        cfg.columnwise = 1;
        gln_grouped_tensor_t in = grouped(in_t(p, q->a_dtype, q->a_scaling, DIM, 2 * H));
        gln_grouped_tensor_t out = grouped(out_t(p, 0, q->out_dtype, q->out_scaling, DIM, H));
        /* hp_dtype is a dtype alone: a query's b field with a scaling mode matches no call */
        const gln_dtype_t hp = q->b_scaling == GLN_SCALING_NONE ? q->b_dtype : (gln_dtype_t)-1;
        return gln_activation_forward_quantize(ctx, GLN_ACT_SWIGLU, hp, &cfg, &in, &out);
    }
    default: return GLN_STATUS_INTERNAL_ERROR;
    }
}

gln_status_t gln_test_probe_run(gln_test_probe_t *p, const gln_op_query_t *q) {
    gln_context_t *ctx = p->ctx;
    switch (q->op) {
    case GLN_OP_QUANTIZE: return run_quantize(p, q, 0);
    case GLN_OP_GROUPED_QUANTIZE: return run_quantize(p, q, 1);
    case GLN_OP_DEQUANTIZE: {
        gln_tensor_t in = in_t(p, q->a_dtype, q->a_scaling, DIM, DIM);
        gln_tensor_t out = out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM);
        return gln_dequantize(ctx, &in, 0, &out);
    }
    case GLN_OP_MXFP8_SWIZZLE: return gln_mxfp8_swizzle_scales(ctx, DIM, DIM, 0, p->in, out_region(p, 0));
    case GLN_OP_GEMM: {
        gln_tensor_t A = in_t(p, q->a_dtype, q->a_scaling, DIM, DIM), B = in_t(p, q->b_dtype, q->b_scaling, DIM, DIM);
        gln_tensor_t D = out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM);
        return gln_gemm(ctx, q->layout, &A, &B, &D, NULL, 0);
    }
    case GLN_OP_GROUPED_GEMM: return run_grouped_gemm(p, q);
    case GLN_OP_GROUPED_DBIAS: {
        gln_grouped_tensor_t dy = grouped(in_t(p, q->a_dtype, q->a_scaling, DIM, DIM));
        gln_tensor_t db[2] = {out_t(p, 0, q->out_dtype, q->out_scaling, 1, DIM),
                              out_t(p, 1, q->out_dtype, q->out_scaling, 1, DIM)};
        return gln_grouped_dbias(ctx, &dy, db, 0);
    }
    case GLN_OP_AMAX: {
        gln_tensor_t x = in_t(p, q->a_dtype, q->a_scaling, DIM, DIM);
        float amax = 0.0f;
        return gln_amax(ctx, &x, &amax);
    }
    case GLN_OP_CAST: {
        gln_tensor_t in = in_t(p, q->a_dtype, q->a_scaling, DIM, DIM);
        gln_tensor_t out = out_t(p, 0, q->out_dtype, q->out_scaling, DIM, DIM);
        return gln_cast(ctx, &in, &out);
    }
    default: return run_moe(p, q);
    }
}

/* ---- enumeration ------------------------------------------------------------------------------ */

/* What each field of an op holds, as the table in grouplin.h says (stated here again, not read
 * from the library). */
enum { F_UNUSED, F_HP, F_QUANT, F_OPERAND };
typedef struct probe_op {
    gln_op_t op;
    int a, b, out, layout;
} probe_op_t;

static const probe_op_t probe_ops[] = {
    {GLN_OP_QUANTIZE, F_HP, F_UNUSED, F_QUANT, 0},
    {GLN_OP_DEQUANTIZE, F_QUANT, F_UNUSED, F_HP, 0},
    {GLN_OP_GROUPED_QUANTIZE, F_HP, F_UNUSED, F_QUANT, 0},
    {GLN_OP_MXFP8_SWIZZLE, F_UNUSED, F_UNUSED, F_UNUSED, 0},
    {GLN_OP_GEMM, F_OPERAND, F_OPERAND, F_HP, 1},
    {GLN_OP_GROUPED_GEMM, F_OPERAND, F_OPERAND, F_HP, 1},
    {GLN_OP_GROUPED_DBIAS, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_AMAX, F_HP, F_UNUSED, F_UNUSED, 0},
    {GLN_OP_CAST, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_MOE_ROUTER_FORWARD, F_UNUSED, F_UNUSED, F_UNUSED, 0},
    {GLN_OP_MOE_ROUTER_BACKWARD, F_UNUSED, F_UNUSED, F_UNUSED, 0},
    {GLN_OP_MOE_PERMUTE_PLAN, F_UNUSED, F_UNUSED, F_UNUSED, 0},
    {GLN_OP_MOE_PERMUTE, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_MOE_PERMUTE_BACKWARD, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_MOE_UNPERMUTE, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_MOE_UNPERMUTE_BACKWARD, F_HP, F_HP, F_HP, 0},
    {GLN_OP_ACTIVATION_FORWARD, F_HP, F_UNUSED, F_HP, 0},
    {GLN_OP_ACTIVATION_BACKWARD, F_HP, F_HP, F_HP, 0},
    {GLN_OP_ACTIVATION_FORWARD_QUANTIZE, F_HP, F_HP, F_QUANT, 0},
};

typedef struct field_value {
    gln_dtype_t dtype;
    gln_scaling_mode_t scaling;
} field_value_t;

static const gln_dtype_t hp_dtypes[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};
static const gln_dtype_t fp8_dtypes[] = {GLN_DTYPE_FP8_E4M3, GLN_DTYPE_FP8_E5M2};
static const gln_scaling_mode_t quant_modes[] = {GLN_SCALING_TENSOR, GLN_SCALING_MXFP8_1D, GLN_SCALING_BLOCK_1D,
                                                 GLN_SCALING_BLOCK_2D};

/* The valid values of a field kind (a single placeholder for an unused field). */
static int valid_values(int kind, field_value_t *v) {
    int n = 0;
    if (kind == F_UNUSED) {
        v[n++] = (field_value_t){GLN_DTYPE_BF16, GLN_SCALING_NONE};
        return n;
    }
    if (kind == F_HP || kind == F_OPERAND)
        for (int i = 0; i < 3; i++) v[n++] = (field_value_t){hp_dtypes[i], GLN_SCALING_NONE};
    if (kind == F_QUANT || kind == F_OPERAND)
        for (int i = 0; i < 2; i++)
            for (int m = 0; m < 4; m++) v[n++] = (field_value_t){fp8_dtypes[i], quant_modes[m]};
    return n;
}

/* Every dtype x scaling mode, and one out-of-range value of each. */
static int all_values(field_value_t *v) {
    int n = 0;
    for (int d = 0; d < GLN_DTYPE_COUNT_; d++)
        for (int s = 0; s <= GLN_SCALING_BLOCK_2D; s++) v[n++] = (field_value_t){(gln_dtype_t)d, (gln_scaling_mode_t)s};
    v[n++] = (field_value_t){(gln_dtype_t)GLN_DTYPE_COUNT_, GLN_SCALING_NONE};
    v[n++] = (field_value_t){GLN_DTYPE_BF16, (gln_scaling_mode_t)(GLN_SCALING_BLOCK_2D + 1)};
    return n;
}

static const char *status_short(gln_status_t s) { return gln_status_string(s); }

static void probe_one(gln_test_probe_t *p, gln_backend_kind_t kind, const gln_op_query_t *q,
                      gln_test_probe_counts_t *c, void (*visit)(const gln_op_query_t *, int)) {
    int sup = -1;
    const gln_status_t qs = gln_backend_supports(kind, q, &sup);
    const gln_status_t cs = gln_test_probe_run(p, q);
    gln_status_t want;
    if (qs == GLN_STATUS_INVALID_ARGUMENT) {
        c->invalid++;
        want = GLN_STATUS_INVALID_ARGUMENT;
    } else if (qs == GLN_STATUS_SUCCESS && (sup == 0 || sup == 1)) {
        if (sup)
            c->supported++;
        else
            c->unsupported++;
        want = sup ? GLN_STATUS_SUCCESS : GLN_STATUS_NOT_SUPPORTED;
        if (visit) visit(q, sup);
    } else {
        c->disagree++;
        CHECK_MSG(0, "op %d: gln_backend_supports -> %s, supported %d", (int)q->op, status_short(qs), sup);
        return;
    }
    if (cs != want) {
        c->disagree++;
        CHECK_MSG(0,
                  "op %d layout %d a %s/%d b %s/%d out %s/%d on %s: the query says %s (supported %d), the call "
                  "returns %s (%s)",
                  (int)q->op, (int)q->layout, gln_dtype_name(q->a_dtype), (int)q->a_scaling,
                  gln_dtype_name(q->b_dtype), (int)q->b_scaling, gln_dtype_name(q->out_dtype), (int)q->out_scaling,
                  gln_backend_name(kind), status_short(qs), sup, status_short(cs), gln_last_error());
    }
}

void gln_test_probe_all(gln_test_probe_t *p, gln_backend_kind_t kind, gln_test_probe_counts_t *counts,
                        void (*visit)(const gln_op_query_t *q, int supported)) {
    memset(counts, 0, sizeof *counts);
    field_value_t va[16], vb[16], vo[16], every[48];
    const int n_every = all_values(every);
    for (size_t i = 0; i < sizeof probe_ops / sizeof probe_ops[0]; i++) {
        const probe_op_t *o = &probe_ops[i];
        const int na = valid_values(o->a, va), nb = valid_values(o->b, vb), no = valid_values(o->out, vo);
        const int nl = o->layout ? 3 : 1;
        gln_op_query_t q = GLN_OP_QUERY_INIT;
        q.op = o->op;
        /* every valid combination */
        for (int l = 0; l < nl; l++)
            for (int a = 0; a < na; a++)
                for (int b = 0; b < nb; b++)
                    for (int d = 0; d < no; d++) {
                        q.layout = (gln_gemm_layout_t)l;
                        q.a_dtype = va[a].dtype, q.a_scaling = va[a].scaling;
                        q.b_dtype = vb[b].dtype, q.b_scaling = vb[b].scaling;
                        q.out_dtype = vo[d].dtype, q.out_scaling = vo[d].scaling;
                        probe_one(p, kind, &q, counts, visit);
                    }
        /* each used field through every value, the others at their first valid value */
        for (int f = 0; f < 3; f++) {
            const int kind_f = f == 0 ? o->a : f == 1 ? o->b : o->out;
            if (kind_f == F_UNUSED) continue;
            for (int v = 0; v < n_every; v++) {
                q.layout = GLN_LAYOUT_TN;
                q.a_dtype = va[0].dtype, q.a_scaling = va[0].scaling;
                q.b_dtype = vb[0].dtype, q.b_scaling = vb[0].scaling;
                q.out_dtype = vo[0].dtype, q.out_scaling = vo[0].scaling;
                gln_dtype_t *dt = f == 0 ? &q.a_dtype : f == 1 ? &q.b_dtype : &q.out_dtype;
                gln_scaling_mode_t *sc = f == 0 ? &q.a_scaling : f == 1 ? &q.b_scaling : &q.out_scaling;
                *dt = every[v].dtype, *sc = every[v].scaling;
                probe_one(p, kind, &q, counts, visit);
            }
        }
        if (o->layout) { /* a layout that is none */
            q.a_dtype = va[0].dtype, q.a_scaling = va[0].scaling;
            q.b_dtype = vb[0].dtype, q.b_scaling = vb[0].scaling;
            q.out_dtype = vo[0].dtype, q.out_scaling = vo[0].scaling;
            q.layout = (gln_gemm_layout_t)3;
            probe_one(p, kind, &q, counts, visit);
        }
    }
}
