/* gln_sharded_weights_create's configuration checks on one rank (self communicator): sizes
 * held to GLN_MAX_DIM / GLN_MAX_ELEMS with INVALID_ARGUMENT before any allocation (the 128x128
 * FP8 gather pads each expert to whole 128-row tiles, the MXFP8 quantized shard to whole 32-row
 * groups: their padded stride and shard unit must not wrap), fp8_quant checked field by field by the quantization calls' validator, quantized_shard's
 * requirements, and a NULL out-pointer refused. */
#include <math.h>
#include <string.h>

#include "harness.h"

static gln_sharded_weights_config_t config(int32_t n, int64_t ko, int64_t ki) {
    gln_sharded_weights_config_t c = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    c.num_experts = n;
    c.out_features = ko;
    c.in_features = ki;
    return c;
}

static gln_sharded_weights_config_t fp8(gln_scaling_mode_t mode, int32_t n, int64_t ko, int64_t ki) {
    gln_sharded_weights_config_t c = config(n, ko, ki);
    c.fp8_gather = 1;
    c.fp8_quant.mode = mode;
    return c;
}

/* create must fail with `want`, a message containing `needle`, and leave *sw NULL. */
static void expect_refused(gln_sharded_weights_config_t c, gln_status_t want, const char *needle) {
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw; /* poisoned */
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &c, &sw), want, needle);
    CHECK(sw == NULL);
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

static void expect_created(gln_sharded_weights_config_t c) {
    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_t *sw = NULL;
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &c, &sw));
    CHECK(sw != NULL);
    CHECK_OK(gln_sharded_weights_destroy(sw));
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

static const int64_t P56 = (int64_t)1 << 56;

/* Each dimension in [1, GLN_MAX_DIM]. */
static void test_dims_past_max_dim(void) {
    expect_refused(config(1, P56 + 1, 1), GLN_STATUS_INVALID_ARGUMENT, "cfg->out_features");
    expect_refused(config(1, 1, P56 + 1), GLN_STATUS_INVALID_ARGUMENT, "cfg->in_features");
    expect_refused(config(1, INT64_MAX, 1), GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_DIM");
    expect_refused(config(1, 1, -5), GLN_STATUS_INVALID_ARGUMENT, "cfg->in_features -5");
    expect_refused(config(0, 1, 1), GLN_STATUS_INVALID_ARGUMENT, "cfg->num_experts");
}

/* Every buffer at most GLN_MAX_ELEMS elements: INVALID_ARGUMENT, not OUT_OF_MEMORY from an
 * attempted allocation. */
static void test_elements_past_max_elems(void) {
    expect_refused(config(1, (int64_t)1 << 28, ((int64_t)1 << 28) + 1), GLN_STATUS_INVALID_ARGUMENT,
                   "GLN_MAX_ELEMS");
    expect_refused(config(((int32_t)1 << 20) + 1, (int64_t)1 << 18, (int64_t)1 << 18),
                   GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_ELEMS");
    expect_refused(config(INT32_MAX, 1 << 20, 1 << 20), GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_ELEMS");
}

/* The 128x128 gather: [1, 2^57] made 128·K_in wrap to 0 (a division by zero); [1, 2^56]
 * "succeeded" with no storage; [1, 2^49 + 1] pads past GLN_MAX_ELEMS. */
static void test_block_2d_padded_stride(void) {
    expect_refused(fp8(GLN_SCALING_BLOCK_2D, 1, 1, (int64_t)1 << 57), GLN_STATUS_INVALID_ARGUMENT,
                   "cfg->in_features");
    expect_refused(fp8(GLN_SCALING_BLOCK_2D, 1, 1, P56), GLN_STATUS_INVALID_ARGUMENT,
                   "rows padded to 128");
    expect_refused(fp8(GLN_SCALING_BLOCK_2D, 1, 1, ((int64_t)1 << 49) + 1), GLN_STATUS_INVALID_ARGUMENT,
                   "GLN_MAX_ELEMS");
    expect_refused(fp8(GLN_SCALING_BLOCK_2D, 3, 129, (int64_t)1 << 47), GLN_STATUS_INVALID_ARGUMENT,
                   "GLN_MAX_ELEMS");
    /* small ones still work, padding included */
    expect_created(fp8(GLN_SCALING_BLOCK_2D, 2, 3, 5));
    expect_created(fp8(GLN_SCALING_MXFP8_1D, 2, 3, 128));
}

/* fp8_quant is validated like gln_quantize's cfg, each field named. */
static void test_fp8_quant_fields(void) {
    gln_sharded_weights_config_t c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_epsilon = NAN;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.amax_epsilon");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_epsilon = -1.0f;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.amax_epsilon");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_epsilon = INFINITY;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.amax_epsilon");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.power_2_scale = 5;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.power_2_scale 5");
    c = fp8(GLN_SCALING_MXFP8_1D, 2, 3, 128);
    c.fp8_quant.e8m0_rounding = (gln_e8m0_rounding_t)9;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.e8m0_rounding 9");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.e8m0_rounding = (gln_e8m0_rounding_t)-1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.e8m0_rounding");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_nan_propagate = 7;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.amax_nan_propagate 7");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.rowwise = 0;
    c.fp8_quant.columnwise = 0;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.rowwise");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.size = 3;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.size");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.fp8_dtype = GLN_DTYPE_BF16;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.fp8_dtype");
    /* mode NONE is not a quantization at all: INVALID, not NOT_SUPPORTED */
    expect_refused(fp8(GLN_SCALING_NONE, 2, 3, 5), GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.mode 0");
    expect_refused(fp8((gln_scaling_mode_t)99, 2, 3, 5), GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.mode 99");
    /* valid configs the gather does not implement stay NOT_SUPPORTED */
    expect_refused(fp8(GLN_SCALING_BLOCK_1D, 2, 3, 5), GLN_STATUS_NOT_SUPPORTED, "not supported");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.delayed = 1;
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "delayed 1");
    /* every valid option is taken */
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_epsilon = 1e-4f;
    c.fp8_quant.power_2_scale = 1;
    c.fp8_quant.amax_nan_propagate = 1;
    expect_created(c);
    /* without fp8_gather, fp8_quant is not read */
    c = config(2, 3, 5);
    c.fp8_quant.amax_epsilon = NAN;
    expect_created(c);
}

/* quantized_shard: 0 or 1, only with fp8_gather, for per-tensor current scaling, 128x128 blocks
 * and MXFP8 (with in_features % 128 == 0, its experts padded to whole 32-row groups); the
 * refusals name what is missing. */
static void test_quantized_shard(void) {
    gln_sharded_weights_config_t c = config(2, 3, 5);
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->quantized_shard 1 needs cfg->fp8_gather = 1");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.quantized_shard = 2;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->quantized_shard 2 must be 0 or 1");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.quantized_shard = -1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "gln_sharded_weights_create: cfg->quantized_shard -1");
    /* MXFP8: accepted with in_features % 128 == 0 (K_out 3 and 200: a partial 32-row group) */
    c = fp8(GLN_SCALING_MXFP8_1D, 2, 3, 128);
    c.quantized_shard = 1;
    expect_created(c);
    c = fp8(GLN_SCALING_MXFP8_1D, 3, 200, 256);
    c.quantized_shard = 1;
    c.fp8_quant.e8m0_rounding = GLN_E8M0_ROUND_FLOOR;
    expect_created(c);
    c = fp8(GLN_SCALING_MXFP8_1D, 2, 3, 160);
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "cfg->fp8_gather with MXFP8 (and quantized_shard) needs in_features % 128 == 0 (in_features 160)");
    c = fp8(GLN_SCALING_MXFP8_1D, 2, 3, 160);
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "cfg->fp8_gather with MXFP8 needs in_features % 128 == 0");
    /* the 32-row padding is held to GLN_MAX_ELEMS too: [1, 2^56] pads past it */
    c = fp8(GLN_SCALING_MXFP8_1D, 1, 1, P56);
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "rows padded to 32");
    c = fp8(GLN_SCALING_MXFP8_1D, 3, 20, (int64_t)1 << 50); /* 60·2^50 elements, padded 96·2^50 */
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "GLN_MAX_ELEMS");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.delayed = 1;
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "cfg->quantized_shard supports per-tensor current scaling");
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "MXFP8 (MXFP8_1D)");
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "delayed 1");
    c = fp8(GLN_SCALING_BLOCK_1D, 2, 3, 5);
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_NOT_SUPPORTED, "cfg->quantized_shard supports");
    /* fp8_quant is still validated first, field by field */
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.fp8_quant.amax_epsilon = NAN;
    c.quantized_shard = 1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_quant.amax_epsilon");
    c = fp8(GLN_SCALING_TENSOR, 2, 3, 5);
    c.quantized_shard = 1;
    expect_created(c);
    c.fp8_quant.power_2_scale = 1;
    c.fp8_quant.amax_epsilon = 1e-3f;
    c.fp8_quant.amax_nan_propagate = 1;
    expect_created(c);
    c = fp8(GLN_SCALING_BLOCK_2D, 2, 130, 129);
    c.quantized_shard = 1;
    expect_created(c);
}

static void test_flags_and_out_pointer(void) {
    gln_sharded_weights_config_t c = config(2, 3, 5);
    c.fp8_gather = 2;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->fp8_gather 2");
    c = config(2, 3, 5);
    c.requires_grad = -1;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->requires_grad -1");
    c = config(2, 3, 5);
    c.async_finalize = 3;
    expect_refused(c, GLN_STATUS_INVALID_ARGUMENT, "cfg->async_finalize 3");

    gln_context_t *ctx = NULL;
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    c = config(2, 3, 5);
    CHECK_STATUS(gln_sharded_weights_create(ctx, comm, &c, NULL), GLN_STATUS_INVALID_ARGUMENT,
                 "sw must not be NULL");
    gln_sharded_weights_t *sw = (gln_sharded_weights_t *)&sw;
    CHECK_STATUS(gln_sharded_weights_create(ctx, NULL, &c, &sw), GLN_STATUS_INVALID_ARGUMENT, "comm");
    CHECK(sw == NULL);
    CHECK_OK(gln_comm_destroy(comm));
    CHECK_OK(gln_context_destroy(ctx));
}

GLN_TEST_MAIN(GLN_CASE(test_dims_past_max_dim), GLN_CASE(test_elements_past_max_elems),
              GLN_CASE(test_block_2d_padded_stride), GLN_CASE(test_fp8_quant_fields),
              GLN_CASE(test_quantized_shard), GLN_CASE(test_flags_and_out_pointer))
