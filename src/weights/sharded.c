/* Sharded weight group: creation, cross-rank consistency check, destruction.
 *
 * Creation is collective.  Every rank validates its own arguments and allocates its shards,
 * then all ranks exchange a small fingerprint (success flag + configuration) with one
 * allreduce of MAX over [v, -v] (max and -min in one call).  A rank that failed locally, or a
 * configuration that differs between ranks, makes create fail on EVERY rank — the later
 * collectives would otherwise be mismatched and hang. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/context.h"
#include "comm/comm.h"
#include "common/error.h"
#include "quant/quant_check.h"
#include "weights/sharded.h"

#define FN "gln_sharded_weights_create"

/* Everything that can differ between ranks and changes what the group computes: the sizes,
 * the dtypes, the flags, the context's backend and every field of fp8_quant (amax_epsilon by its
 * bits; all 0 without fp8_gather, which ignores fp8_quant). */
enum { FP_OK, FP_NUM, FP_OUT, FP_IN, FP_DTYPE, FP_ASYNC, FP_GRAD, FP_BACKEND, FP_FP8, FP_FP8_MODE,
       FP_FP8_DTYPE, FP_FP8_ROWWISE, FP_FP8_COLUMNWISE, FP_FP8_DELAYED, FP_FP8_EPSILON,
       FP_FP8_POW2, FP_FP8_E8M0, FP_FP8_NAN, FP_QSHARD, FP_COUNT };
static const char *const fingerprint_names[FP_COUNT] = {
    "success", "num_experts", "out_features", "in_features", "working_dtype", "async_finalize",
    "requires_grad", "the context's backend", "fp8_gather", "fp8_quant.mode",
    "fp8_quant.fp8_dtype", "fp8_quant.rowwise", "fp8_quant.columnwise", "fp8_quant.delayed",
    "fp8_quant.amax_epsilon (its FP32 bits)", "fp8_quant.power_2_scale",
    "fp8_quant.e8m0_rounding", "fp8_quant.amax_nan_propagate", "quantized_shard"};

/* Copy a versioned config: exactly the sizes of known versions are accepted (version 1 ends
 * before fp8_gather, version 2 before quantized_shard; missing fields keep their defaults). */
static gln_status_t read_config(const gln_sharded_weights_config_t *cfg,
                                gln_sharded_weights_config_t *out) {
    gln_sharded_weights_config_t def = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    *out = def;
    GLN_REQUIRE_NOT_NULL(FN, cfg);
    GLN_REQUIRE_ARG(cfg->size == sizeof def || cfg->size == GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE ||
                        cfg->size == GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE,
                    "%s: cfg->size %zu is not a known version (expected %zu, %zu for version 2 or "
                    "%zu for version 1; start from GLN_SHARDED_WEIGHTS_CONFIG_INIT)",
                    FN, cfg->size, sizeof def, (size_t)GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE,
                    (size_t)GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE);
    memcpy(out, cfg, cfg->size);
    out->size = sizeof def;
    return GLN_STATUS_SUCCESS;
}

/* The scaling the FP8 all-gather (and so the quantized shard) implements: per-tensor current
 * scaling, MXFP8 and 128x128 blocks. */
static int gather_mode_supported(const gln_quant_config_t *q) {
    return (q->mode == GLN_SCALING_TENSOR && !q->delayed) || q->mode == GLN_SCALING_MXFP8_1D ||
           q->mode == GLN_SCALING_BLOCK_2D;
}

/* fp8_quant is checked by the validator of every quantization call (one definition of a valid
 * config; the copy replaces the caller's, normalized to the current version), then limited to
 * what the FP8 all-gather implements (a refusal names quantized_shard when it is set). */
static gln_status_t validate_fp8(gln_sharded_weights_config_t *c) {
    GLN_REQUIRE_ARG(c->quantized_shard == 0 || c->quantized_shard == 1,
                    "%s: cfg->quantized_shard %d must be 0 or 1", FN, c->quantized_shard);
    GLN_REQUIRE_ARG(!c->quantized_shard || c->fp8_gather == 1,
                    "%s: cfg->quantized_shard 1 needs cfg->fp8_gather = 1 (fp8_gather %d): the "
                    "quantized shard is what the FP8 all-gather gathers", FN, c->fp8_gather);
    if (!c->fp8_gather) return GLN_STATUS_SUCCESS;
    GLN_REQUIRE_ARG(c->fp8_gather == 1, "%s: cfg->fp8_gather %d must be 0 or 1", FN, c->fp8_gather);
    gln_quant_config_t q;
    GLN_TRY(gln_quant_config_read(FN, "cfg->fp8_quant.", &c->fp8_quant, &q));
    c->fp8_quant = q;
    GLN_REQUIRE(!c->quantized_shard || gather_mode_supported(&q), GLN_STATUS_NOT_SUPPORTED,
                "%s: cfg->quantized_shard supports per-tensor current scaling (fp8_quant.mode "
                "TENSOR, delayed 0), MXFP8 (MXFP8_1D) and 128x128 blocks (BLOCK_2D); mode %d "
                "delayed %d is not supported", FN, (int)q.mode, q.delayed);
    GLN_REQUIRE(gather_mode_supported(&q), GLN_STATUS_NOT_SUPPORTED,
                "%s: cfg->fp8_gather supports per-tensor current scaling (fp8_quant.mode TENSOR, "
                "delayed 0), MXFP8 and 128x128 blocks; mode %d delayed %d is not supported", FN,
                (int)q.mode, q.delayed);
    /* MXFP8: whole 1x32 blocks per shard, and code grids without column padding (rowwise
     * pad4(K_in/32) columns, the quantized shard's columnwise pad128(K_in)), so that each rank's
     * codes are one compact block of the gathered grid */
    GLN_REQUIRE(q.mode != GLN_SCALING_MXFP8_1D || c->in_features % 128 == 0, GLN_STATUS_NOT_SUPPORTED,
                "%s: cfg->fp8_gather with MXFP8%s needs in_features %% 128 == 0 (in_features %lld): "
                "each rank's E8M0 codes are gathered as one compact block of the scale grid", FN,
                c->quantized_shard ? " (and quantized_shard)" : "", (long long)c->in_features);
    return GLN_STATUS_SUCCESS;
}

/* The communicator moves memory of the group's context: host memory for a CPU context (no
 * context or a CPU one), else exactly this context. */
static gln_status_t validate_comm(gln_context_t *ctx, const gln_comm_t *comm) {
    int ok = gln_comm_on_host(comm) ? ctx->kind == GLN_BACKEND_CPU : comm->ctx == ctx;
    GLN_REQUIRE(ok, GLN_STATUS_INVALID_ARGUMENT,
                "%s: comm (%s) is bound to %s, but ctx uses the %s backend; create the "
                "communicator with this context (on a GPU: gln_comm_create_nccl or "
                "gln_comm_create_self with the CUDA context)",
                FN, comm->ops->name, gln_comm_on_host(comm) ? "host memory" : "another context",
                gln_backend_name(ctx->kind));
    return GLN_STATUS_SUCCESS;
}

/* Element limit of every buffer of the group: GLN_MAX_ELEMS, or less where the address space
 * cannot hold that many FP32 elements. */
static int64_t elems_limit(void) {
    const size_t addressable = SIZE_MAX / sizeof(float);
    return addressable < (size_t)GLN_MAX_ELEMS ? (int64_t)addressable : GLN_MAX_ELEMS;
}

static gln_status_t validate(gln_context_t *ctx, const gln_comm_t *comm, gln_sharded_weights_config_t *c) {
    GLN_REQUIRE_NOT_NULL(FN, ctx);
    GLN_TRY(validate_comm(ctx, comm));
    GLN_REQUIRE_ARG(c->num_experts >= 1, "%s: cfg->num_experts %d must be >= 1", FN,
                    (int)c->num_experts);
    GLN_REQUIRE_ARG(c->out_features >= 1 && c->out_features <= GLN_MAX_DIM,
                    "%s: cfg->out_features %lld must be in [1, GLN_MAX_DIM = 2^56]", FN,
                    (long long)c->out_features);
    GLN_REQUIRE_ARG(c->in_features >= 1 && c->in_features <= GLN_MAX_DIM,
                    "%s: cfg->in_features %lld must be in [1, GLN_MAX_DIM = 2^56]", FN,
                    (long long)c->in_features);
    GLN_REQUIRE_ARG(c->working_dtype == GLN_DTYPE_BF16 || c->working_dtype == GLN_DTYPE_FP32,
                    "%s: cfg->working_dtype %s must be bf16 or fp32", FN,
                    gln_dtype_name(c->working_dtype));
    GLN_REQUIRE_ARG(c->requires_grad == 0 || c->requires_grad == 1,
                    "%s: cfg->requires_grad %d must be 0 or 1", FN, c->requires_grad);
    GLN_REQUIRE_ARG(c->async_finalize == 0 || c->async_finalize == 1,
                    "%s: cfg->async_finalize %d must be 0 or 1", FN, c->async_finalize);
    return validate_fp8(c);
}

/* The flat layout (expert stride, total, shard length), every size held to elems_limit() —
 * the full buffer of all ranks' padded shards included — with no product formed before it is
 * known to fit. */
static gln_status_t plan_layout(gln_sharded_weights_t *sw, int ranks) {
    const gln_sharded_weights_config_t *c = &sw->cfg;
    const int64_t limit = elems_limit();
    const int two_d = gln_sharded_fp8_2d(sw), mxq = gln_sharded_mx_qshard(sw);
    /* 128x128 all-gather: each expert padded to whole 128-row tiles; MXFP8 quantized shard: to
     * whole 32-row groups (every 32x1 block of the columnwise copy in one expert and one shard) */
    const int64_t row_pad = two_d ? 128 : mxq ? 32 : 1;
    const int64_t rows = (c->out_features + row_pad - 1) / row_pad * row_pad;
    GLN_REQUIRE_ARG(rows <= limit / c->in_features,
                    "%s: one expert of [%lld, %lld]%s is too large: more than GLN_MAX_ELEMS = 2^56 "
                    "elements (the limit of one buffer)", FN, (long long)c->out_features,
                    (long long)c->in_features, two_d ? " (rows padded to 128)" : mxq ? " (rows padded to 32)" : "");
    sw->expert_elems = c->out_features * c->in_features;
    sw->expert_stride = rows * c->in_features;
    GLN_REQUIRE_ARG(c->num_experts <= limit / sw->expert_stride,
                    "%s: %d experts of [%lld, %lld] are too large: more than GLN_MAX_ELEMS = 2^56 "
                    "elements (the limit of one buffer)", FN, (int)c->num_experts,
                    (long long)c->out_features, (long long)c->in_features);
    sw->total = c->num_experts * sw->expert_stride;
    sw->ranks = ranks;
    /* shards of whole units: 128-row tiles (128x128 gather: every tile in one shard), 32-row
     * groups (MXFP8 quantized shard: every 1x32 and 32x1 block in one shard), 128 elements
     * (MXFP8: every 1x32 block in one shard), else single elements.  unit <= total. */
    const int64_t unit = two_d || mxq ? row_pad * c->in_features : gln_sharded_fp8_mx(sw) ? 128 : 1;
    const int64_t units = (sw->total + unit - 1) / unit;
    sw->shard_len = (units + ranks - 1) / ranks * unit;
    GLN_REQUIRE_ARG(sw->shard_len <= limit / ranks,
                    "%s: the %d ranks' padded shards of %lld elements are too large: more than "
                    "GLN_MAX_ELEMS = 2^56 elements (the gathered buffer)", FN, ranks, (long long)sw->shard_len);
    return GLN_STATUS_SUCCESS;
}

/* A backend buffer of `bytes`, zeroed (padding stays zero). */
static gln_status_t alloc_zeroed(gln_context_t *ctx, size_t bytes, void **ptr) {
    GLN_TRY(gln_ctx_alloc(ctx, bytes, ptr));
    return gln_ctx_zero(ctx, *ptr, bytes);
}

static gln_status_t allocate_shards(gln_sharded_weights_t *sw) {
    gln_context_t *ctx = sw->ctx;
    size_t n = (size_t)sw->shard_len;
    GLN_TRY(alloc_zeroed(ctx, n * sizeof(float), (void **)&sw->master));
    GLN_TRY(alloc_zeroed(ctx, n * gln_dtype_size(sw->cfg.working_dtype), &sw->working));
    GLN_TRY(alloc_zeroed(ctx, n * sizeof(float), (void **)&sw->main_grad));
    if (!sw->cfg.fp8_gather) return GLN_STATUS_SUCCESS;
    GLN_TRY(alloc_zeroed(ctx, n, (void **)&sw->fp8_shard));
    const int64_t cols = gln_sharded_block_cols(sw);
    if (!cols) {
        /* per-tensor: amax, scale, two sinks; + the stored decode scales with quantized_shard */
        size_t work = (sw->cfg.quantized_shard ? 5 : 4) * (size_t)sw->cfg.num_experts * sizeof(float);
        return alloc_zeroed(ctx, work, (void **)&sw->fp8_work);
    }
    /* blocks: the shard as [n / cols, cols] — 128x128, whole 128-row tiles (n is a multiple of
     * 128·K_in); MXFP8, whole 1x32 blocks, or with quantized_shard whole 32-row groups (n is a
     * multiple of 32·K_in), rowwise and columnwise */
    gln_quant_layout_t lay;
    GLN_TRY(gln_quant_layout(sw->cfg.fp8_quant.mode, sw->cfg.fp8_quant.fp8_dtype, (int64_t)n / cols, cols, &lay));
    sw->sscale_bytes = lay.scale_bytes;
    GLN_TRY(alloc_zeroed(ctx, lay.scale_bytes, (void **)&sw->fp8_sscale));
    if (!gln_sharded_mx_qshard(sw)) return GLN_STATUS_SUCCESS;
    GLN_TRY(alloc_zeroed(ctx, n, (void **)&sw->fp8_col));
    return alloc_zeroed(ctx, lay.col_scale_bytes, (void **)&sw->fp8_col_sscale);
}

/* Local part of create: validation and allocation of this rank's shards. */
static gln_status_t create_local(gln_context_t *ctx, gln_comm_t *comm,
                                 const gln_sharded_weights_config_t *cfg,
                                 gln_sharded_weights_t *sw) {
    GLN_TRY(read_config(cfg, &sw->cfg));
    GLN_TRY(validate(ctx, comm, &sw->cfg));
    sw->ctx = ctx;
    GLN_TRY(plan_layout(sw, comm->size));
    sw->shard_offset = (int64_t)comm->rank * sw->shard_len;
    GLN_TRY(allocate_shards(sw));
    return gln_sharded_quantize_initial(sw);
}

/* fp8_quant's fields (validated: small non-negative values; amax_epsilon finite, >= 0). */
static void fingerprint_fp8(const gln_quant_config_t *q, int64_t *v) {
    v[FP_FP8_MODE] = q->mode;
    v[FP_FP8_DTYPE] = q->fp8_dtype;
    v[FP_FP8_ROWWISE] = q->rowwise;
    v[FP_FP8_COLUMNWISE] = q->columnwise;
    v[FP_FP8_DELAYED] = q->delayed;
    uint32_t bits = 0;
    if (q->amax_epsilon != 0.0f) memcpy(&bits, &q->amax_epsilon, sizeof bits); /* -0 is 0 */
    v[FP_FP8_EPSILON] = bits;
    v[FP_FP8_POW2] = q->power_2_scale;
    v[FP_FP8_E8M0] = q->e8m0_rounding;
    v[FP_FP8_NAN] = q->amax_nan_propagate;
}

/* All ranks learn whether every rank succeeded and whether their configurations agree. */
static gln_status_t check_agreement(gln_comm_t *comm, const gln_sharded_weights_t *sw, int ok) {
    const gln_sharded_weights_config_t *c = &sw->cfg;
    int64_t v[2 * FP_COUNT] = {0};
    v[FP_OK] = ok ? 0 : 1; /* max over ranks: 1 when any rank failed */
    if (ok) {
        v[FP_NUM] = c->num_experts;
        v[FP_OUT] = c->out_features;
        v[FP_IN] = c->in_features;
        v[FP_DTYPE] = c->working_dtype;
        v[FP_ASYNC] = c->async_finalize != 0;
        v[FP_GRAD] = c->requires_grad != 0;
        v[FP_BACKEND] = sw->ctx->kind;
        v[FP_FP8] = c->fp8_gather;
        if (c->fp8_gather) fingerprint_fp8(&c->fp8_quant, v);
        v[FP_QSHARD] = c->quantized_shard;
    }
    for (int i = 0; i < FP_COUNT; i++) v[FP_COUNT + i] = -v[i];
    /* host memory on every transport (NCCL keeps a host path for this handshake) */
    GLN_TRY(gln_comm_host_allreduce(comm, v, 2 * FP_COUNT, GLN_REDUCE_MAX));
    if (!ok) return GLN_STATUS_SUCCESS; /* the caller reports its own failure */
    GLN_REQUIRE(v[FP_OK] == 0, GLN_STATUS_COMM_ERROR,
                "%s: another rank failed to create its shards (see the error on that rank)", FN);
    for (int i = 1; i < FP_COUNT; i++) {
        int64_t hi = v[i], lo = -v[FP_COUNT + i];
        GLN_REQUIRE(hi == lo, GLN_STATUS_COMM_ERROR,
                    "%s: ranks disagree on %s (min %lld, max %lld); every rank must pass the "
                    "same configuration",
                    FN, fingerprint_names[i], (long long)lo, (long long)hi);
    }
    return GLN_STATUS_SUCCESS;
}

static void free_buffers(gln_sharded_weights_t *sw) {
    if (!sw->ctx) return;
    gln_ctx_free(sw->ctx, sw->master);
    gln_ctx_free(sw->ctx, sw->working);
    gln_ctx_free(sw->ctx, sw->main_grad);
    gln_ctx_free(sw->ctx, sw->grad_full);
    gln_ctx_free(sw->ctx, sw->rs_buf);
    gln_ctx_free(sw->ctx, sw->fp8_shard);
    gln_ctx_free(sw->ctx, sw->fp8_work);
    gln_ctx_free(sw->ctx, sw->fp8_sscale);
    gln_ctx_free(sw->ctx, sw->fp8_col);
    gln_ctx_free(sw->ctx, sw->fp8_col_sscale);
}

/* Every refusal on one rank joins the agreement (a missing out-pointer included), so the other
 * ranks fail with it instead of waiting in a collective it never enters.  Only a rank without
 * a communicator cannot take part: the header makes that the caller's duty. */
gln_status_t gln_sharded_weights_create(gln_context_t *ctx, gln_comm_t *comm,
                                        const gln_sharded_weights_config_t *cfg,
                                        gln_sharded_weights_t **sw) {
    if (sw) *sw = NULL;
    GLN_REQUIRE_NOT_NULL(FN, comm);

    gln_sharded_weights_t *s = calloc(1, sizeof *s);
    gln_status_t local = !sw  ? gln_fail(GLN_STATUS_INVALID_ARGUMENT, "%s: sw must not be NULL", FN)
                         : !s ? gln_fail(GLN_STATUS_OUT_OF_MEMORY, "%s: out of host memory", FN)
                              : create_local(ctx, comm, cfg, s);
    char local_msg[512] = "";
    if (local != GLN_STATUS_SUCCESS) snprintf(local_msg, sizeof local_msg, "%s", gln_last_error());

    gln_sharded_weights_t dummy = {0};
    gln_status_t st = check_agreement(comm, s ? s : &dummy, local == GLN_STATUS_SUCCESS);
    if (local != GLN_STATUS_SUCCESS) st = gln_fail(local, "%s", local_msg);
    if (st != GLN_STATUS_SUCCESS) {
        if (s) free_buffers(s);
        free(s);
        return st;
    }
    s->comm = comm;
    gln_sharded_protocol_init(s);
    *sw = s;
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_sharded_weights_destroy(gln_sharded_weights_t *sw) {
    if (!sw) return GLN_STATUS_SUCCESS;
    gln_status_t st = gln_sharded_complete(sw); /* an MPI request must not outlive us */
    gln_sharded_free_gathers(sw);               /* prefetches completed, live and pooled freed */
    free_buffers(sw);
    free(sw->live);
    free(sw->pool);
    free(sw);
    return st;
}
