/* Fuzz harness 5: gln_sharded_weights_create over the self communicator, every configuration
 * field drawn (sizes past the limits, every fp8_quant field in and out of range, unknown
 * versions, a NULL context / config / out-pointer), then the created group's layout, a load /
 * gather round trip and both materializations.
 *
 * Promises checked beyond "no memory error, no UB, no leak":
 *   - the status is this harness's own reading of the header: INVALID_ARGUMENT for a NULL
 *     argument, an unknown cfg->size, a size outside [1, GLN_MAX_DIM] or a group past
 *     GLN_MAX_ELEMS elements (the 128x128 gather's 128-row padding counted), a flag not 0 / 1, a
 *     working dtype not bf16 / fp32, or with fp8_gather an fp8_quant that gln_quantize would
 *     refuse (mode NONE included); NOT_SUPPORTED for a valid fp8_quant the gather does not
 *     implement (BLOCK_1D, delayed TENSOR, MXFP8 with in_features % 128 != 0); GLN_MAX_ELEMS
 *     counts the padding rows (128 for the 128x128 gather, 32 for the MXFP8 quantized shard);
 *     else SUCCESS —
 *     never OUT_OF_MEMORY for a size the limits refuse, never a crash;
 *   - *sw is NULL after a failure;
 *   - quantized_shard: INVALID_ARGUMENT unless 0 / 1 or without fp8_gather = 1; a created
 *     group's backward copies carry the columnwise copy (MXFP8: that copy alone), and requantize
 *     succeeds (a no-op without it);
 *   - created: one rank's shard covers the whole (padded) flat buffer from offset 0, of whole
 *     128-row tiles (128x128), 32-row groups (MXFP8 quantized shard) or 128-element rows
 *     (MXFP8); load_full / gather_master round trip
 *     bit for bit; materialize_forward / _backward hand out N tensors of [K_out, K_in] that
 *     release takes back (no live bytes after). */
#include <math.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_N = 3, MAX_DIM_TAME = 20 };
static const int64_t P56 = (int64_t)1 << 56;

/* A dimension: tame, a multiple of 128 (MXFP8 needs one), or (wild) one of fz_size's. */
static int64_t draw_dim(fz_t *f) {
    int dummy = 0;
    if (fz_pick(f, 4) == 0) return 128 * fz_int(f, 1, 2);
    if (f->wild && fz_pick(f, 8) == 0) {
        /* refused alone, or with 128-row padding, or with another dimension (a group the
         * limits accept is shrunk below before it is created) */
        static const int64_t BIG[] = {((int64_t)1 << 49) + 1, (int64_t)1 << 50, (int64_t)1 << 56,
                                      ((int64_t)1 << 56) + 1, (int64_t)1 << 57, INT64_MAX, 0, -5};
        return BIG[fz_pick(f, 8)];
    }
    return fz_size(f, MAX_DIM_TAME, &dummy);
}

/* 1 when the group's elements pass GLN_MAX_ELEMS (or its address space) -- __int128-free: each
 * product is tested by division first. */
static int too_many(int64_t n, int64_t rows, int64_t cols) {
    if (rows > P56 / cols) return 1;
    return n > P56 / (rows * cols);
}

static gln_status_t expected(const gln_sharded_weights_config_t *c, int null_arg, size_t size) {
    if (null_arg) return GLN_STATUS_INVALID_ARGUMENT;
    if (size != sizeof *c && size != GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE) return GLN_STATUS_INVALID_ARGUMENT;
    if (c->num_experts < 1) return GLN_STATUS_INVALID_ARGUMENT;
    if (c->out_features < 1 || c->out_features > P56 || c->in_features < 1 || c->in_features > P56)
        return GLN_STATUS_INVALID_ARGUMENT;
    if (c->working_dtype != GLN_DTYPE_BF16 && c->working_dtype != GLN_DTYPE_FP32) return GLN_STATUS_INVALID_ARGUMENT;
    if ((unsigned)c->requires_grad > 1 || (unsigned)c->async_finalize > 1) return GLN_STATUS_INVALID_ARGUMENT;
    int fp8 = size == sizeof *c && c->fp8_gather;
    int qshard = size == sizeof *c && c->quantized_shard;
    if (size == sizeof *c && (unsigned)c->quantized_shard > 1) return GLN_STATUS_INVALID_ARGUMENT;
    if (qshard && c->fp8_gather != 1) return GLN_STATUS_INVALID_ARGUMENT;
    if (size == sizeof *c && (unsigned)c->fp8_gather > 1) return GLN_STATUS_INVALID_ARGUMENT;
    const gln_quant_config_t *q = &c->fp8_quant;
    if (fp8) {
        if (q->size != sizeof *q && q->size != offsetof(gln_quant_config_t, amax_nan_propagate))
            return GLN_STATUS_INVALID_ARGUMENT;
        int nanp = q->size == sizeof *q ? q->amax_nan_propagate : 0;
        if (q->mode < GLN_SCALING_TENSOR || q->mode > GLN_SCALING_BLOCK_2D) return GLN_STATUS_INVALID_ARGUMENT;
        if (q->fp8_dtype != GLN_DTYPE_FP8_E4M3 && q->fp8_dtype != GLN_DTYPE_FP8_E5M2) return GLN_STATUS_INVALID_ARGUMENT;
        if ((unsigned)q->rowwise > 1 || (unsigned)q->columnwise > 1 || !(q->rowwise || q->columnwise))
            return GLN_STATUS_INVALID_ARGUMENT;
        if ((unsigned)q->delayed > 1 || (q->delayed && q->mode != GLN_SCALING_TENSOR)) return GLN_STATUS_INVALID_ARGUMENT;
        if (!isfinite(q->amax_epsilon) || q->amax_epsilon < 0.0f) return GLN_STATUS_INVALID_ARGUMENT;
        if ((unsigned)q->power_2_scale > 1 || (unsigned)q->e8m0_rounding > 1 || (unsigned)nanp > 1)
            return GLN_STATUS_INVALID_ARGUMENT;
    }
    if (fp8 && ((q->mode == GLN_SCALING_TENSOR && q->delayed) || q->mode == GLN_SCALING_BLOCK_1D ||
                (q->mode == GLN_SCALING_MXFP8_1D && c->in_features % 128 != 0)))
        return GLN_STATUS_NOT_SUPPORTED;
    int two_d = fp8 && q->mode == GLN_SCALING_BLOCK_2D, mxq = qshard && q->mode == GLN_SCALING_MXFP8_1D;
    int64_t rows = two_d ? (c->out_features + 127) / 128 * 128 : mxq ? (c->out_features + 31) / 32 * 32 : c->out_features;
    if (too_many(c->num_experts, rows, c->in_features)) return GLN_STATUS_INVALID_ARGUMENT;
    return GLN_STATUS_SUCCESS;
}

static void draw_quant(fz_t *f, gln_quant_config_t *q) {
    q->mode = (gln_scaling_mode_t)(fz_pick(f, 8) ? fz_int(f, 1, 4) : fz_int(f, -1, 6));
    q->fp8_dtype = fz_pick(f, 8) ? (fz_bool(f) ? GLN_DTYPE_FP8_E4M3 : GLN_DTYPE_FP8_E5M2)
                                 : (gln_dtype_t)fz_int(f, -1, 9);
    q->rowwise = fz_pick(f, 8) ? 1 : (int)fz_int(f, -1, 2);
    q->columnwise = fz_pick(f, 8) ? fz_bool(f) : (int)fz_int(f, -1, 2);
    q->delayed = fz_pick(f, 8) ? 0 : (int)fz_int(f, -1, 2);
    static const float EPS[] = {0.0f, 1e-4f, 0.5f, -0.0f, -1.0f, NAN, INFINITY, 3e38f};
    q->amax_epsilon = EPS[fz_pick(f, 8)];
    q->power_2_scale = fz_pick(f, 4) ? fz_bool(f) : (int)(int8_t)fz_u8(f);
    q->e8m0_rounding = (gln_e8m0_rounding_t)(fz_pick(f, 4) ? fz_bool(f) : (int)(int8_t)fz_u8(f));
    q->amax_nan_propagate = fz_pick(f, 4) ? fz_bool(f) : (int)(int8_t)fz_u8(f);
    if (fz_pick(f, 16) == 0) q->size = fz_bool(f) ? offsetof(gln_quant_config_t, amax_nan_propagate) : 7;
}

static void materialize(gln_sharded_weights_t *sw, const gln_sharded_weights_config_t *c, int backward) {
    const gln_dist_weights_t *p = gln_sharded_weights_protocol(sw);
    FZ_ASSERT(p && p->num_experts == c->num_experts, "protocol table");
    gln_tensor_t w[MAX_N];
    memset(w, 0, sizeof w);
    gln_status_t st = backward ? p->materialize_backward(p->impl, w) : p->materialize_forward(p->impl, w);
    if (fz_status(st, backward ? "materialize_backward" : "materialize_forward") != GLN_STATUS_SUCCESS) return;
    /* the MXFP8 quantized shard's backward hands the columnwise copy alone */
    const int col_only = backward && c->quantized_shard && c->fp8_quant.mode == GLN_SCALING_MXFP8_1D;
    for (int e = 0; e < c->num_experts; e++)
        FZ_ASSERT(w[e].rows == c->out_features && w[e].cols == c->in_features && (col_only ? !w[e].data : !!w[e].data),
                  "materialized expert %d is [%lld, %lld]%s", e, (long long)w[e].rows, (long long)w[e].cols,
                  w[e].data ? "" : " without data");
    /* the quantized shard's backward also hands the columnwise copy the dgrad needs */
    if (backward && c->quantized_shard)
        for (int e = 0; e < c->num_experts; e++) FZ_ASSERT(w[e].col_data && w[e].col_scale_inv, "no columnwise copy");
    FZ_ASSERT(p->release(p->impl, w) == GLN_STATUS_SUCCESS, "release: %s", gln_last_error());
    size_t live = 1;
    FZ_ASSERT(gln_sharded_weights_materialized_bytes(sw, &live, NULL) == GLN_STATUS_SUCCESS && live == 0,
              "%zu bytes live after release", live);
}

static void use_group(fz_t *f, gln_sharded_weights_t *sw, const gln_sharded_weights_config_t *c) {
    const int64_t n = c->num_experts * c->out_features * c->in_features;
    float *master, *grad;
    int64_t len = -1, off = -1;
    FZ_ASSERT(gln_sharded_weights_shard(sw, &master, &grad, &len, &off) == GLN_STATUS_SUCCESS, "shard: %s",
              gln_last_error());
    const gln_quant_config_t *q = &c->fp8_quant;
    int two_d = c->fp8_gather && q->mode == GLN_SCALING_BLOCK_2D, mx = c->fp8_gather && q->mode == GLN_SCALING_MXFP8_1D;
    int mxq = mx && c->quantized_shard;
    int64_t rows = two_d ? (c->out_features + 127) / 128 * 128 : mxq ? (c->out_features + 31) / 32 * 32 : c->out_features;
    FZ_ASSERT(off == 0 && len >= c->num_experts * rows * c->in_features, "one rank: shard [%lld, +%lld) for %lld",
              (long long)off, (long long)len, (long long)n);
    FZ_ASSERT(!two_d || len % (128 * c->in_features) == 0, "128x128 shard %lld not of whole tiles", (long long)len);
    FZ_ASSERT(!mx || len % 128 == 0, "MXFP8 shard %lld not of whole 128-element rows", (long long)len);
    FZ_ASSERT(!mxq || len % (32 * c->in_features) == 0, "MXFP8 quantized shard %lld not of whole 32-row groups",
              (long long)len);
    float *full = fz_alloc(f, (size_t)n * sizeof(float)), *back = fz_alloc(f, (size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) full[i] = fz_value(f);
    if (fz_status(gln_sharded_weights_load_full(sw, full), "load_full") == GLN_STATUS_SUCCESS &&
        fz_status(gln_sharded_weights_gather_master(sw, back), "gather_master") == GLN_STATUS_SUCCESS)
        FZ_ASSERT(memcmp(back, full, (size_t)n * sizeof(float)) == 0, "gather_master != load_full");
    materialize(sw, c, 0);
    materialize(sw, c, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_t f = fz_begin(data, size);
    gln_context_t *ctx = fz_context();
    gln_comm_t *comm = NULL;
    FZ_ASSERT(gln_comm_create_self(NULL, &comm) == GLN_STATUS_SUCCESS, "comm_create_self: %s", gln_last_error());

    gln_sharded_weights_config_t c = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    c.num_experts = (int32_t)(fz_pick(&f, 16) ? fz_int(&f, 1, MAX_N) : fz_int(&f, -1, 0));
    c.out_features = draw_dim(&f);
    c.in_features = draw_dim(&f);
    if (f.wild && fz_pick(&f, 16) == 0) c.num_experts = fz_bool(&f) ? INT32_MAX : (1 << 20) + 1;
    c.working_dtype = fz_pick(&f, 8) ? (fz_bool(&f) ? GLN_DTYPE_BF16 : GLN_DTYPE_FP32) : (gln_dtype_t)fz_int(&f, -1, 9);
    c.requires_grad = fz_pick(&f, 8) ? fz_bool(&f) : (int)(int8_t)fz_u8(&f);
    c.async_finalize = fz_pick(&f, 8) ? fz_bool(&f) : (int)(int8_t)fz_u8(&f);
    c.fp8_gather = fz_pick(&f, 8) ? fz_bool(&f) : (int)(int8_t)fz_u8(&f);
    draw_quant(&f, &c.fp8_quant);
    int version = fz_pick(&f, 16);
    if (version == 0) c.size = GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE; /* fp8 fields unread */
    if (version == 1) c.size = sizeof c + 8;
    int null_arg = fz_pick(&f, 16); /* 1: ctx, 2: cfg, 3: sw NULL */
    null_arg = null_arg <= 3 ? null_arg : 0;
    /* the quantized shard: mostly where it is valid (with fp8_gather), sometimes anything */
    int qs = fz_pick(&f, 8);
    c.quantized_shard = qs == 0 ? (int)(int8_t)fz_u8(&f) : qs < 4 ? c.fp8_gather == 1 : 0;

    /* a group the limits accept but memory could not hold (a wild dimension or expert count):
     * shrunk to a tame one with the same options, so the fuzzer never asks for petabytes */
    if (expected(&c, 0, c.size) == GLN_STATUS_SUCCESS &&
        (c.num_experts > MAX_N || c.out_features > 256 || c.in_features > 256)) {
        c.num_experts = 1 + c.num_experts % MAX_N;
        c.out_features = 1 + c.out_features % MAX_DIM_TAME;
        c.in_features = 128;
    }
    if (c.size == GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE) c.fp8_gather = 0; /* what the library reads */
    if (c.size != sizeof c) c.quantized_shard = 0;

    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw; /* poisoned */
    gln_status_t st = gln_sharded_weights_create(null_arg == 1 ? NULL : ctx, comm, null_arg == 2 ? NULL : &c,
                                                 null_arg == 3 ? NULL : &sw);
    fz_status(st, "gln_sharded_weights_create");
    gln_status_t want = expected(&c, null_arg != 0, c.size);
    FZ_ASSERT(st == want, "create returned %s, expected %s (N %d, [%lld, %lld], fp8_gather %d mode %d): %s",
              gln_status_string(st), gln_status_string(want), (int)c.num_experts, (long long)c.out_features,
              (long long)c.in_features, c.fp8_gather, (int)c.fp8_quant.mode, gln_last_error());
    if (null_arg != 3) {
        FZ_ASSERT((st == GLN_STATUS_SUCCESS) == (sw != NULL), "*sw %p after %s", (void *)sw, gln_status_string(st));
        if (st == GLN_STATUS_SUCCESS) {
            use_group(&f, sw, &c);
            FZ_ASSERT(gln_sharded_weights_requantize(sw) == GLN_STATUS_SUCCESS, "requantize: %s", gln_last_error());
            if (c.quantized_shard) materialize(sw, &c, 1);
            FZ_ASSERT(gln_sharded_weights_destroy(sw) == GLN_STATUS_SUCCESS, "destroy: %s", gln_last_error());
        }
    }
    fz_free_all();
    FZ_ASSERT(gln_comm_destroy(comm) == GLN_STATUS_SUCCESS, "comm_destroy");
    return 0;
}
