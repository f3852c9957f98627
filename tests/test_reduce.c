/* gln_grouped_dbias, gln_amax and gln_cast on the CPU backend, and the argument checks of every
 * public GEMM / reduction call (one case per class of invalid input, checking status and
 * message). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Unit roundoff of each dtype (24, 8, 11 significant bits). */
#define U_FP32 0x1p-24
#define U_BF16 0x1p-8
#define U_FP16 0x1p-11

static const gln_dtype_t HP[3] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP16};

static gln_context_t *make_ctx(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    return ctx;
}

static void *alloc_random(gln_rng_t *rng, gln_dtype_t dt, size_t n, double scale) {
    void *p = gln_test_alloc(n * gln_dtype_size(dt));
    for (size_t i = 0; i < n; i++) gln_store(p, dt, i, gln_rng_normal(rng) * scale);
    return p;
}

/* ---- dbias -------------------------------------------------------------------------------- */

/* Column sums per member must be exactly the FP32 row-order sum (+ old value when
 * accumulating) rounded once to the dbias dtype: that is the documented, deterministic
 * order, so the check is bitwise.  Empty members give 0 or leave dbias unchanged; rows past
 * Σ splits hold NaN and must not be read. */
static void dbias_case(gln_context_t *ctx, gln_dtype_t in_dt, gln_dtype_t out_dt, const int64_t *splits,
                       int32_t num, int accumulate) {
    gln_rng_t rng = gln_rng_seed(7 + (uint64_t)in_dt * 3 + (uint64_t)out_dt);
    const int64_t cols = 37, extra = 4;
    int64_t sum = 0;
    for (int32_t i = 0; i < num; i++) sum += splits[i];
    const int64_t rows = sum + extra;
    void *x = alloc_random(&rng, in_dt, (size_t)(rows * cols), 3.0);
    gln_poison((char *)x + (size_t)(sum * cols) * gln_dtype_size(in_dt), in_dt, (size_t)(extra * cols));
    gln_grouped_tensor_t dy = {num, splits, 0, gln_tensor_make(in_dt, rows, cols, x)};
    gln_tensor_t db[8];
    void *bufs[8], *before[8];
    const size_t bytes = (size_t)cols * gln_dtype_size(out_dt);
    for (int32_t i = 0; i < num; i++) {
        bufs[i] = accumulate ? alloc_random(&rng, out_dt, (size_t)cols, 2.0) : gln_test_alloc(bytes);
        if (!accumulate) gln_poison(bufs[i], out_dt, (size_t)cols);
        before[i] = malloc(bytes);
        memcpy(before[i], bufs[i], bytes);
        db[i] = gln_tensor_make(out_dt, 1, cols, bufs[i]);
    }
    CHECK_OK(gln_grouped_dbias(ctx, &dy, db, accumulate));
    int64_t row0 = 0;
    for (int32_t i = 0; i < num; i++) {
        for (int64_t j = 0; j < cols; j++) {
            double got = gln_load(bufs[i], out_dt, (size_t)j);
            if (splits[i] == 0 && accumulate) {
                CHECK_MSG(memcmp(bufs[i], before[i], bytes) == 0, "dbias[%d] (empty) changed", (int)i);
                break;
            }
            float acc = 0.0f;
            for (int64_t r = row0; r < row0 + splits[i]; r++) acc += (float)gln_load(x, in_dt, (size_t)(r * cols + j));
            if (accumulate) acc += (float)gln_load(before[i], out_dt, (size_t)j);
            double want = gln_round_to(acc, out_dt);
            CHECK_MSG(got == want, "dbias[%d][%lld] %s->%s acc%d: got %.9g want %.9g", (int)i, (long long)j,
                      gln_dtype_name(in_dt), gln_dtype_name(out_dt), accumulate, got, want);
        }
        CHECK(gln_guard_ok(bufs[i]));
        row0 += splits[i];
    }
    for (int32_t i = 0; i < num; i++) {
        gln_test_free(bufs[i]);
        free(before[i]);
    }
    gln_test_free(x);
}

static void test_dbias(void) {
    gln_context_t *ctx = make_ctx();
    static const int64_t s1[] = {5, 0, 17, 1}, s2[] = {0, 0, 29, 0}, s3[] = {0, 0}, s4[] = {129};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int acc = 0; acc < 2; acc++) {
                dbias_case(ctx, HP[a], HP[b], s1, 4, acc);
                dbias_case(ctx, HP[a], HP[b], s2, 4, acc);
                dbias_case(ctx, HP[a], HP[b], s3, 2, acc);
                dbias_case(ctx, HP[a], HP[b], s4, 1, acc);
            }
    gln_context_destroy(ctx);
}

/* The row-order FP32 sum is also within the float64 error bound (sanity of the model). */
static void test_dbias_vs_float64(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(99);
    static const int64_t splits[] = {300, 1};
    const int64_t cols = 9, rows = 301;
    float *x = alloc_random(&rng, GLN_DTYPE_FP32, (size_t)(rows * cols), 1.0);
    float *db = gln_test_alloc(2 * (size_t)cols * sizeof(float));
    gln_grouped_tensor_t dy = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, rows, cols, x)};
    gln_tensor_t dbt[2] = {gln_tensor_make(GLN_DTYPE_FP32, 1, cols, db),
                           gln_tensor_make(GLN_DTYPE_FP32, 1, cols, db + cols)};
    CHECK_OK(gln_grouped_dbias(ctx, &dy, dbt, 0));
    for (int64_t j = 0; j < cols; j++) {
        double s = 0, mag = 0;
        for (int64_t r = 0; r < 300; r++) s += x[r * cols + j], mag += fabs(x[r * cols + j]);
        /* recursive FP32 summation of n terms: error <= (n - 1)·u·Σ|x| */
        CHECK_MSG(fabs(db[j] - s) <= 299 * U_FP32 * mag, "column %lld: %.9g vs %.9g", (long long)j, db[j], s);
        CHECK(db[cols + j] == x[300 * cols + j]);
    }
    gln_test_free(x);
    gln_test_free(db);
    gln_context_destroy(ctx);
}

/* ---- amax --------------------------------------------------------------------------------- */

static void test_amax(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(5);
    for (int d = 0; d < 3; d++) {
        const size_t n = 5 * 17;
        void *x = alloc_random(&rng, HP[d], n, 2.0);
        gln_tensor_t t = gln_tensor_make(HP[d], 5, 17, x);
        double want = 0;
        for (size_t i = 0; i < n; i++) want = fmax(want, fabs(gln_load(x, HP[d], i)));
        float amax = -1;
        CHECK_OK(gln_amax(ctx, &t, &amax));
        CHECK_MSG(amax == want, "%s amax %.9g want %.9g", gln_dtype_name(HP[d]), amax, want);
        gln_store(x, HP[d], 40, -1000.0); /* a negative maximum counts by magnitude */
        CHECK_OK(gln_amax(ctx, &t, &amax));
        CHECK(amax == 1000.0f);
        gln_store(x, HP[d], 3, -INFINITY);
        CHECK_OK(gln_amax(ctx, &t, &amax));
        CHECK(isinf(amax) && amax > 0);
        gln_store(x, HP[d], 80, NAN); /* NaN is ignored (TE's fmaxf rule): the Inf stays */
        CHECK_OK(gln_amax(ctx, &t, &amax));
        CHECK_MSG(isinf(amax) && amax > 0, "%s: NaN must be ignored by amax", gln_dtype_name(HP[d]));
        gln_test_free(x);
    }
    gln_tensor_t empty = gln_tensor_make(GLN_DTYPE_BF16, 0, 8, NULL);
    float amax = -1;
    CHECK_OK(gln_amax(ctx, &empty, &amax));
    CHECK(amax == 0.0f);
    gln_context_destroy(ctx);
}

/* ---- cast --------------------------------------------------------------------------------- */

/* Round x to `bits` significant bits with RNE, independent of the library: min normal
 * 2^(emin-1), max finite `max` (beyond it: Inf). */
static double round_sig(double x, int bits, int emin, double max) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    int e;
    frexp(x, &e);
    if (e < emin) e = emin; /* subnormal: fixed quantum */
    double q = ldexp(1.0, e - bits);
    double r = nearbyint(x / q) * q; /* default rounding mode: to nearest, ties to even */
    return fabs(r) > max ? copysign(INFINITY, x) : r;
}

static double independent_round(double x, gln_dtype_t dt) {
    switch (dt) {
    case GLN_DTYPE_BF16: return round_sig(x, 8, -125, 0x1.FEp127);
    case GLN_DTYPE_FP16: return round_sig(x, 11, -13, 65504.0);
    default: return (double)(float)x;
    }
}

static void test_cast(void) {
    gln_context_t *ctx = make_ctx();
    gln_rng_t rng = gln_rng_seed(3);
    const size_t n = 3000; /* more than one internal chunk */
    /* FP32 source spanning normal, subnormal-for-fp16 and overflow-for-fp16 ranges */
    float *src = gln_test_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) src[i] = (float)(gln_rng_normal(&rng) * ldexp(1.0, (int)(i % 50) - 30));
    src[0] = NAN;
    src[1] = -INFINITY;
    src[2] = 65520.0f;        /* fp16: exactly half-way past max → Inf */
    src[3] = 65519.0f;        /* fp16: rounds down to 65504 */
    src[4] = 0x1.0101p0f;     /* bf16 tie-ish: above half-way, rounds up */
    src[5] = 0x1.01p0f;       /* bf16 exact tie → even (1.0) */
    gln_tensor_t in = gln_tensor_make(GLN_DTYPE_FP32, 1, (int64_t)n, src);
    for (int d = 1; d < 3; d++) {
        void *mid = gln_test_alloc(n * 2);
        float *back = gln_test_alloc(n * sizeof(float));
        gln_tensor_t tm = gln_tensor_make(HP[d], 1, (int64_t)n, mid), tb = gln_tensor_make(GLN_DTYPE_FP32, 1, (int64_t)n, back);
        CHECK_OK(gln_cast(ctx, &in, &tm));
        CHECK_OK(gln_cast(ctx, &tm, &tb));
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            double want = independent_round(src[i], HP[d]);
            int ok = isnan(want) ? isnan(back[i]) : back[i] == want;
            if (!ok && bad++ < 5)
                gln_test_fail_at(__FILE__, __LINE__, "fp32->%s->fp32 [%zu]: %a -> %a, want %a", gln_dtype_name(HP[d]),
                                 i, src[i], back[i], want);
        }
        /* 16-bit -> fp32 -> 16-bit is the identity (bitwise; NaN stays NaN) */
        void *again = gln_test_alloc(n * 2);
        gln_tensor_t ta = gln_tensor_make(HP[d], 1, (int64_t)n, again);
        CHECK_OK(gln_cast(ctx, &tb, &ta));
        CHECK(gln_check_bitwise("16-bit round trip", mid, again, n * 2));
        CHECK(gln_guard_ok(mid) && gln_guard_ok(back) && gln_guard_ok(again));
        gln_test_free(mid);
        gln_test_free(back);
        gln_test_free(again);
    }
    /* bf16 -> fp16 and back: one rounding from the exact bf16 value */
    uint16_t *b = gln_test_alloc(n * 2), *h = gln_test_alloc(n * 2);
    gln_tensor_t tb16 = gln_tensor_make(GLN_DTYPE_BF16, 1, (int64_t)n, b), th16 = gln_tensor_make(GLN_DTYPE_FP16, 1, (int64_t)n, h);
    CHECK_OK(gln_cast(ctx, &in, &tb16));
    CHECK_OK(gln_cast(ctx, &tb16, &th16));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double v = gln_load(b, GLN_DTYPE_BF16, i), want = independent_round(v, GLN_DTYPE_FP16);
        double got = gln_load(h, GLN_DTYPE_FP16, i);
        int ok = isnan(want) ? isnan(got) : got == want;
        if (!ok && bad++ < 5) gln_test_fail_at(__FILE__, __LINE__, "bf16->fp16 [%zu]: %a -> %a, want %a", i, v, got, want);
    }
    /* same dtype: a copy */
    float *copy = gln_test_alloc(n * sizeof(float));
    gln_tensor_t tc = gln_tensor_make(GLN_DTYPE_FP32, 1, (int64_t)n, copy);
    CHECK_OK(gln_cast(ctx, &in, &tc));
    CHECK(gln_check_bitwise("fp32 copy", src, copy, n * sizeof(float)));
    /* empty */
    gln_tensor_t e1 = gln_tensor_make(GLN_DTYPE_FP32, 0, 3, NULL), e2 = gln_tensor_make(GLN_DTYPE_BF16, 0, 3, NULL);
    CHECK_OK(gln_cast(ctx, &e1, &e2));
    gln_test_free(src);
    gln_test_free(b);
    gln_test_free(h);
    gln_test_free(copy);
    gln_context_destroy(ctx);
}

/* ---- host memory of the CPU backend -------------------------------------------------------- */

static void test_backend_memory(void) {
    gln_context_options_t opts = GLN_CONTEXT_OPTIONS_INIT;
    opts.num_threads = 1; /* exercises the OpenBLAS thread setting */
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(&opts, &ctx));
    void *p = NULL, *q = NULL, *z = (void *)1;
    CHECK_OK(gln_malloc(ctx, 1000, &p));
    CHECK_OK(gln_malloc(ctx, 1000, &q));
    CHECK_MSG(p && ((uintptr_t)p % 64) == 0, "gln_malloc must return 64-byte aligned memory (%p)", p);
    CHECK_OK(gln_malloc(ctx, 0, &z));
    CHECK(z == NULL); /* 0 bytes: NULL and success */
    unsigned char src[1000];
    for (int i = 0; i < 1000; i++) src[i] = (unsigned char)(i * 7);
    CHECK_OK(gln_memcpy(ctx, p, src, 1000, GLN_COPY_HOST_TO_BACKEND));
    CHECK_OK(gln_memcpy(ctx, q, p, 1000, GLN_COPY_BACKEND_TO_BACKEND));
    unsigned char back[1000];
    CHECK_OK(gln_memcpy(ctx, back, q, 1000, GLN_COPY_BACKEND_TO_HOST));
    CHECK(memcmp(src, back, 1000) == 0);
    CHECK_OK(gln_synchronize(ctx));
    CHECK_OK(gln_free(ctx, p));
    CHECK_OK(gln_free(ctx, q));
    CHECK_OK(gln_free(ctx, NULL));
    CHECK_OK(gln_context_destroy(ctx));
}

/* ---- invalid arguments -------------------------------------------------------------------- */

#define INV GLN_STATUS_INVALID_ARGUMENT
#define UNS GLN_STATUS_NOT_SUPPORTED

static void test_gemm_invalid(void) {
    gln_context_t *ctx = make_ctx();
    float a[64], b[64], d[64], bias[16];
    uint8_t q[64];
    float s = 1.0f;
    gln_tensor_t A = gln_tensor_make(GLN_DTYPE_FP32, 4, 3, a);   /* TN: [n=4, k=3] */
    gln_tensor_t B = gln_tensor_make(GLN_DTYPE_FP32, 7, 3, b);   /* [m=7, k=3] */
    gln_tensor_t D = gln_tensor_make(GLN_DTYPE_FP32, 7, 4, d);
    gln_tensor_t bi = gln_tensor_make(GLN_DTYPE_BF16, 1, 4, bias);
    CHECK_OK(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, &bi, 0));

    /* null pointers */
    CHECK_STATUS(gln_gemm(NULL, GLN_LAYOUT_TN, &A, &B, &D, NULL, 0), INV, "ctx");
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, NULL, &B, &D, NULL, 0), INV, "A must not be NULL");
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, NULL, &D, NULL, 0), INV, "B must not be NULL");
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, NULL, NULL, 0), INV, "D must not be NULL");
    gln_tensor_t Anull = A;
    Anull.data = NULL;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &Anull, &B, &D, NULL, 0), INV, "A->data");
    /* bad layout */
    CHECK_STATUS(gln_gemm(ctx, (gln_gemm_layout_t)7, &A, &B, &D, NULL, 0), INV, "layout 7");
    /* negative shape */
    gln_tensor_t Aneg = A;
    Aneg.rows = -3;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &Aneg, &B, &D, NULL, 0), INV, "A->rows -3 must be >= 0");
    /* mismatched shapes */
    gln_tensor_t D5 = gln_tensor_make(GLN_DTYPE_FP32, 5, 4, d);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D5, NULL, 0), INV,
                 "gln_gemm: D->rows 5 != B->rows 7 (layout TN: D is [B.rows, A.rows])");
    gln_tensor_t D3 = gln_tensor_make(GLN_DTYPE_FP32, 7, 3, d);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D3, NULL, 0), INV, "D->cols 3 != A->rows 4");
    gln_tensor_t B4 = gln_tensor_make(GLN_DTYPE_FP32, 7, 4, b);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B4, &D, NULL, 0), INV, "A->cols 3 != B->cols 4");
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_NN, &A, &B, &D, NULL, 0), INV, "A->rows 4 != B->cols 3");
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_NT, &A, &B, &D, NULL, 0), INV, "A->rows 4 != B->rows 7");
    /* wrong output dtype */
    gln_tensor_t Dq = gln_tensor_make(GLN_DTYPE_FP8_E4M3, 7, 4, d);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &Dq, NULL, 0), INV, "D->dtype fp8_e4m3");
    gln_tensor_t Di = gln_tensor_make(GLN_DTYPE_INT32, 7, 4, d);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &Di, NULL, 0), INV, "D->dtype");
    /* bias: wrong shape, wrong dtype */
    gln_tensor_t b3 = gln_tensor_make(GLN_DTYPE_BF16, 1, 3, bias);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, &b3, 0), INV, "bias is [1, 3]");
    gln_tensor_t bq = gln_tensor_make(GLN_DTYPE_E8M0, 1, 4, bias);
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &A, &B, &D, &bq, 0), INV, "bias->dtype");
    /* unsupported combinations: high precision x FP8, per-tensor x MXFP8 */
    gln_tensor_t Q = gln_tensor_make(GLN_DTYPE_FP8_E4M3, 4, 3, q);
    Q.scaling = GLN_SCALING_TENSOR;
    Q.scale_inv = &s;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &Q, &B, &D, NULL, 0), UNS, "A (fp8_e4m3) and B (fp32) must both be high precision or both quantized");
    gln_tensor_t QB = gln_tensor_make(GLN_DTYPE_FP8_E5M2, 7, 3, q);
    QB.scaling = GLN_SCALING_MXFP8_1D;
    QB.scale_inv = q;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &Q, &QB, &D, NULL, 0), UNS,
                 "A->scaling TENSOR and B->scaling MXFP8_1D cannot be combined");
    /* FP8 dtype without a scaling mode, high-precision dtype with one */
    gln_tensor_t Qn = Q;
    Qn.scaling = GLN_SCALING_NONE;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &Qn, &B, &D, NULL, 0), INV, "not a quantized mode");
    gln_tensor_t As = A;
    As.scaling = GLN_SCALING_TENSOR;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_TN, &As, &B, &D, NULL, 0), INV, "A->scaling");
    /* the copy the layout needs is missing: NN reads A's columnwise copy */
    gln_tensor_t Qa = gln_tensor_make(GLN_DTYPE_FP8_E4M3, 3, 4, q); /* NN: A [k=3, n=4] */
    Qa.scaling = GLN_SCALING_TENSOR;
    Qa.scale_inv = &s;
    gln_tensor_t Qb = QB;
    Qb.scaling = GLN_SCALING_TENSOR;
    Qb.scale_inv = &s;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_NN, &Qa, &Qb, &D, NULL, 0), INV, "A->col_data is NULL");
    Qa.col_data = q;
    CHECK_STATUS(gln_gemm(ctx, GLN_LAYOUT_NN, &Qa, &Qb, &D, NULL, 0), INV, "A->col_scale_inv is NULL");
    Qa.col_scale_inv = &s;
    CHECK_OK(gln_gemm(ctx, GLN_LAYOUT_NN, &Qa, &Qb, &D, NULL, 0));
    gln_context_destroy(ctx);
}

static void test_grouped_gemm_invalid(void) {
    gln_context_t *ctx = make_ctx();
    float w[2][12], x[40], y[40], dw[2][12];
    int64_t splits[2] = {3, 2}, neg[2] = {3, -1}, big[2] = {6, 5}, other[2] = {2, 3};
    gln_tensor_t W[2] = {gln_tensor_make(GLN_DTYPE_FP32, 4, 3, w[0]), gln_tensor_make(GLN_DTYPE_FP32, 4, 3, w[1])};
    gln_grouped_tensor_t X = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 6, 3, x)};
    gln_grouped_tensor_t Y = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 6, 4, y)};
    gln_grouped_gemm_args_t args = GLN_GROUPED_GEMM_ARGS_INIT;
    args.layout = GLN_LAYOUT_TN;
    args.a_list = W;
    args.b = &X;
    args.d_grouped = &Y;
    CHECK_OK(gln_grouped_gemm(ctx, &args));

    gln_grouped_gemm_args_t t = args;
    CHECK_STATUS(gln_grouped_gemm(NULL, &args), INV, "ctx");
    CHECK_STATUS(gln_grouped_gemm(ctx, NULL), INV, "args");
    t.size = 3;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->size 3");
    t = args;
    t.b = NULL;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->b must not be NULL");
    /* grouped headers: num, splits */
    gln_grouped_tensor_t Xb = X;
    Xb.num = 0;
    t = args;
    t.b = &Xb;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->b->num 0 must be >= 1");
    Xb = X;
    Xb.splits = NULL;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->b->splits must not be NULL");
    Xb.splits = neg;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->b->splits[1] = -1 must be >= 0");
    Xb.splits = big;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "splits sum 11 > args->b->packed.rows 6");
    Xb.splits = other;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_grouped->splits[0] = 3 != args->b->splits[0] = 2");
    /* wrong operands for the layout */
    t = args;
    t.a_list = NULL;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->a_list must not be NULL for layout TN");
    t = args;
    t.a_grouped = &X;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->a_grouped and args->d_list must be NULL");
    t = args;
    t.d_grouped = NULL;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_grouped must not be NULL");
    t = args;
    t.layout = (gln_gemm_layout_t)-1;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "layout -1");
    /* member shapes */
    gln_tensor_t Wbad[2] = {W[0], gln_tensor_make(GLN_DTYPE_FP32, 4, 2, w[1])};
    t = args;
    t.a_list = Wbad;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->a_list[1]->cols 2 != args->b->packed->cols 3");
    gln_grouped_tensor_t Yb = Y;
    Yb.packed.cols = 5;
    t = args;
    t.d_grouped = &Yb;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_grouped->packed->cols 5 != args->a_list[0]->rows 4");
    Yb = Y;
    Yb.packed.dtype = GLN_DTYPE_FP8_E4M3;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_grouped->packed->dtype");
    /* bias of the wrong length */
    gln_tensor_t bl[2] = {gln_tensor_make(GLN_DTYPE_FP32, 1, 4, w[0]), gln_tensor_make(GLN_DTYPE_FP32, 1, 3, w[1])};
    t = args;
    t.bias_list = bl;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->bias_list[1] is [1, 3]");
    /* mixed high precision x FP8 member */
    uint8_t q[12];
    float s = 1.0f;
    gln_tensor_t Wq[2] = {W[0], gln_tensor_make(GLN_DTYPE_FP8_E4M3, 4, 3, q)};
    Wq[1].scaling = GLN_SCALING_TENSOR;
    Wq[1].scale_inv = &s;
    t = args;
    t.a_list = Wq;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), UNS,
                 "args->a_list[1] (fp8_e4m3) and args->b->packed (fp32) must both be high precision");

    /* NT: wgrad into d_list */
    gln_grouped_tensor_t DY = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 6, 4, y)};
    gln_tensor_t DW[2] = {gln_tensor_make(GLN_DTYPE_FP32, 4, 3, dw[0]), gln_tensor_make(GLN_DTYPE_FP32, 4, 3, dw[1])};
    gln_grouped_gemm_args_t nt = GLN_GROUPED_GEMM_ARGS_INIT;
    nt.layout = GLN_LAYOUT_NT;
    nt.a_grouped = &X;
    nt.b = &DY;
    nt.d_list = DW;
    CHECK_OK(gln_grouped_gemm(ctx, &nt));
    t = nt;
    t.d_list = NULL;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_list must not be NULL for layout NT");
    t = nt;
    t.bias_list = bl;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "wgrad outputs take no bias");
    gln_tensor_t DWbad[2] = {DW[0], gln_tensor_make(GLN_DTYPE_FP32, 3, 3, dw[1])};
    t = nt;
    t.d_list = DWbad;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->d_list[1]->rows 3 != args->b->packed->cols 4");
    int64_t splits3[3] = {3, 2, 0};
    gln_grouped_tensor_t X3 = X;
    X3.num = 3;
    X3.splits = splits3;
    t = nt;
    t.a_grouped = &X3;
    CHECK_STATUS(gln_grouped_gemm(ctx, &t), INV, "args->a_grouped->num 3 != args->b->num 2");
    gln_context_destroy(ctx);
}

static void test_reduce_invalid(void) {
    gln_context_t *ctx = make_ctx();
    float x[24], db[2][4], amax;
    int64_t splits[2] = {3, 2}, neg[2] = {-2, 2}, big[2] = {5, 2};
    gln_grouped_tensor_t dy = {2, splits, 0, gln_tensor_make(GLN_DTYPE_FP32, 6, 4, x)};
    gln_tensor_t dbt[2] = {gln_tensor_make(GLN_DTYPE_BF16, 1, 4, db[0]), gln_tensor_make(GLN_DTYPE_FP32, 1, 4, db[1])};
    memset(x, 0, sizeof x);
    CHECK_OK(gln_grouped_dbias(ctx, &dy, dbt, 0));
    CHECK_STATUS(gln_grouped_dbias(NULL, &dy, dbt, 0), INV, "ctx");
    CHECK_STATUS(gln_grouped_dbias(ctx, NULL, dbt, 0), INV, "dy must not be NULL");
    CHECK_STATUS(gln_grouped_dbias(ctx, &dy, NULL, 0), INV, "dbias");
    gln_grouped_tensor_t bad = dy;
    bad.splits = neg;
    CHECK_STATUS(gln_grouped_dbias(ctx, &bad, dbt, 0), INV, "dy->splits[0] = -2 must be >= 0");
    bad.splits = big;
    CHECK_STATUS(gln_grouped_dbias(ctx, &bad, dbt, 0), INV, "dy splits sum 7 > dy->packed.rows 6");
    bad = dy;
    bad.packed.dtype = GLN_DTYPE_FP8_E4M3;
    CHECK_STATUS(gln_grouped_dbias(ctx, &bad, dbt, 0), INV, "dy->packed->dtype");
    gln_tensor_t dbbad[2] = {dbt[0], gln_tensor_make(GLN_DTYPE_FP32, 2, 4, db[1])};
    CHECK_STATUS(gln_grouped_dbias(ctx, &dy, dbbad, 0), INV, "dbias[1] is [2, 4]");

    gln_tensor_t t = gln_tensor_make(GLN_DTYPE_FP32, 6, 4, x);
    CHECK_OK(gln_amax(ctx, &t, &amax));
    CHECK_STATUS(gln_amax(NULL, &t, &amax), INV, "ctx");
    CHECK_STATUS(gln_amax(ctx, NULL, &amax), INV, "x must not be NULL");
    CHECK_STATUS(gln_amax(ctx, &t, NULL), INV, "amax");
    gln_tensor_t tq = gln_tensor_make(GLN_DTYPE_INT64, 6, 4, x);
    CHECK_STATUS(gln_amax(ctx, &tq, &amax), INV, "x->dtype int64");

    uint16_t o[24];
    gln_tensor_t out = gln_tensor_make(GLN_DTYPE_BF16, 6, 4, o);
    CHECK_OK(gln_cast(ctx, &t, &out));
    CHECK_STATUS(gln_cast(NULL, &t, &out), INV, "ctx");
    CHECK_STATUS(gln_cast(ctx, NULL, &out), INV, "in must not be NULL");
    CHECK_STATUS(gln_cast(ctx, &t, NULL), INV, "out must not be NULL");
    gln_tensor_t out2 = gln_tensor_make(GLN_DTYPE_BF16, 4, 6, o);
    CHECK_STATUS(gln_cast(ctx, &t, &out2), INV, "out is [4, 6] but in is [6, 4]");
    gln_tensor_t out8 = gln_tensor_make(GLN_DTYPE_FP8_E5M2, 6, 4, o);
    CHECK_STATUS(gln_cast(ctx, &t, &out8), INV, "out->dtype fp8_e5m2");
    gln_context_destroy(ctx);
}

GLN_TEST_MAIN(GLN_CASE(test_backend_memory), GLN_CASE(test_dbias), GLN_CASE(test_dbias_vs_float64), GLN_CASE(test_amax), GLN_CASE(test_cast),
              GLN_CASE(test_gemm_invalid), GLN_CASE(test_grouped_gemm_invalid), GLN_CASE(test_reduce_invalid))
