/* Versioned structs accept exactly the sizes of known versions: a size that
 * ends inside a field (offsetof(field) + 3) or runs past the struct is refused with
 * INVALID_ARGUMENT and "not a known version", before any field is read.  (gln_context_options_t
 * is covered in test_context_stream.c; the quant and layer configs in their own tests.) */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define NOT_KNOWN "not a known version"

static void test_forward_args_size(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.in_features = 4;
    c.out_features = 2;
    gln_grouped_linear_t *layer = NULL;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &layer));
    if (!layer) return;
    uint16_t x[4] = {0}, y[2] = {0};
    int64_t m[1] = {1};
    gln_tensor_t xt = gln_tensor_make(GLN_DTYPE_BF16, 1, 4, x);
    gln_tensor_t yt = gln_tensor_make(GLN_DTYPE_BF16, 1, 2, y);
    gln_grouped_linear_forward_args_t a = GLN_GROUPED_LINEAR_FORWARD_ARGS_INIT;
    a.x = &xt;
    a.m_splits = m;
    a.y = &yt;
    CHECK_OK(gln_grouped_linear_forward(layer, &a, NULL));
    a.size = offsetof(gln_grouped_linear_forward_args_t, y) + 3;
    char needle[64];
    snprintf(needle, sizeof needle, "args->size %zu is not a known version", a.size);
    CHECK_STATUS(gln_grouped_linear_forward(layer, &a, NULL), GLN_STATUS_INVALID_ARGUMENT, needle);
    a.size = sizeof a + 8;
    CHECK_STATUS(gln_grouped_linear_forward(layer, &a, NULL), GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    CHECK_OK(gln_grouped_linear_destroy(layer));
}

static void test_grouped_gemm_args_size(void) {
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.size = offsetof(gln_grouped_gemm_args_t, b) + 3;
    CHECK_STATUS(gln_grouped_gemm(gln_test_cpu_context(), &a), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_grouped_gemm: args->size");
    CHECK_STATUS(gln_grouped_gemm(gln_test_cpu_context(), &a), GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    a.size = sizeof(size_t);
    CHECK_STATUS(gln_grouped_gemm(gln_test_cpu_context(), &a), GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
}

/* Version 1 of gln_grouped_gemm_args_t (up to `accumulate`, before block_scales_pow2) is still
 * accepted and computes the same: a grouped bf16 fprop with a v1 size (and other bytes where
 * block_scales_pow2 would be) gives the bytes of the current version. */
static void test_grouped_gemm_args_v1(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    uint16_t x[3 * 4], w0[2 * 4], w1[2 * 4], y_now[3 * 2], y_v1[3 * 2];
    for (int i = 0; i < 12; i++) gln_store(x, GLN_DTYPE_BF16, (size_t)i, (double)(i % 5) - 2.0);
    for (int i = 0; i < 8; i++) {
        gln_store(w0, GLN_DTYPE_BF16, (size_t)i, (double)(i % 3) - 1.0);
        gln_store(w1, GLN_DTYPE_BF16, (size_t)i, (double)(i % 4) - 1.5);
    }
    const int64_t splits[2] = {2, 1};
    gln_tensor_t w[2] = {gln_tensor_make(GLN_DTYPE_BF16, 2, 4, w0), gln_tensor_make(GLN_DTYPE_BF16, 2, 4, w1)};
    gln_grouped_tensor_t xg = {2, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, 3, 4, x)};
    gln_grouped_tensor_t yg = {2, splits, 0, gln_tensor_make(GLN_DTYPE_BF16, 3, 2, y_now)};
    gln_grouped_gemm_args_t a = GLN_GROUPED_GEMM_ARGS_INIT;
    a.layout = GLN_LAYOUT_TN;
    a.a_list = w;
    a.b = &xg;
    a.d_grouped = &yg;
    CHECK_OK(gln_grouped_gemm(ctx, &a));
    yg.packed.data = y_v1;
    a.size = offsetof(gln_grouped_gemm_args_t, block_scales_pow2);
    memset(&a.block_scales_pow2, 0x5A, sizeof a.block_scales_pow2); /* not part of version 1 */
    CHECK_OK(gln_grouped_gemm(ctx, &a));
    gln_check_bitwise("grouped GEMM with a version-1 args struct", y_v1, y_now, sizeof y_now);
}

static void test_delayed_update_options_size(void) {
    float hist[2] = {1.0f, 0.0f}, scale[1] = {1.0f}, fmax[1] = {448.0f};
    gln_delayed_update_options_t o = GLN_DELAYED_UPDATE_OPTIONS_INIT;
    CHECK_OK(gln_delayed_scaling_update_ex(1, 2, hist, scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o));
    o.size = offsetof(gln_delayed_update_options_t, amax_nan_propagate) + 3;
    char needle[64];
    snprintf(needle, sizeof needle, "opts->size %zu is not a known version", o.size);
    CHECK_STATUS(gln_delayed_scaling_update_ex(1, 2, hist, scale, fmax, 0, GLN_AMAX_ALGO_MAX, &o),
                 GLN_STATUS_INVALID_ARGUMENT, needle);
}

static void test_sharded_config_size(void) {
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = 1;
    sc.out_features = 2;
    sc.in_features = 3;
    sc.size = offsetof(gln_sharded_weights_config_t, working_dtype) + 3;
    gln_sharded_weights_t *sw = NULL;
    CHECK_STATUS(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw),
                 GLN_STATUS_INVALID_ARGUMENT, "cfg->size");
    CHECK_STATUS(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw),
                 GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    CHECK(sw == NULL);
    /* version 2 (ends before quantized_shard) and version 1 (before fp8_gather) are read up to
     * their size: the garbage past it is never looked at */
    sc.fp8_gather = 1;
    sc.fp8_quant.mode = GLN_SCALING_TENSOR;
    sc.quantized_shard = 7;
    sc.size = GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE;
    CHECK(GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE == offsetof(gln_sharded_weights_config_t, quantized_shard));
    CHECK_OK(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw));
    CHECK_OK(gln_sharded_weights_destroy(sw));
    sw = NULL;
    sc.fp8_gather = 9;
    sc.size = GLN_SHARDED_WEIGHTS_CONFIG_V1_SIZE;
    CHECK_OK(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw));
    CHECK_OK(gln_sharded_weights_destroy(sw));
    sw = NULL;
    /* the current size reads quantized_shard */
    sc.size = sizeof sc;
    sc.fp8_gather = 1;
    CHECK_STATUS(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw),
                 GLN_STATUS_INVALID_ARGUMENT, "cfg->quantized_shard 7");
    /* sizes between versions and past the current one are refused */
    sc.size = GLN_SHARDED_WEIGHTS_CONFIG_V2_SIZE + 1;
    CHECK_STATUS(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw),
                 GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    sc.size = sizeof sc + 8;
    CHECK_STATUS(gln_sharded_weights_create(gln_test_cpu_context(), comm, &sc, &sw),
                 GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    CHECK(sw == NULL);
    gln_comm_destroy(comm);
}

static void test_dist_weights_size(void) {
    gln_context_t *ctx = gln_test_cpu_context();
    gln_comm_t *comm = NULL;
    CHECK_OK(gln_comm_create_self(NULL, &comm));
    gln_sharded_weights_config_t sc = GLN_SHARDED_WEIGHTS_CONFIG_INIT;
    sc.num_experts = 1;
    sc.out_features = 2;
    sc.in_features = 4;
    gln_sharded_weights_t *sw = NULL;
    CHECK_OK(gln_sharded_weights_create(ctx, comm, &sc, &sw));
    if (!sw) return;
    gln_dist_weights_t d = *gln_sharded_weights_protocol(sw);
    gln_grouped_linear_config_t c = GLN_GROUPED_LINEAR_CONFIG_INIT;
    c.in_features = 4;
    c.out_features = 2;
    c.bias = 0;
    c.params.distributed = &d;
    gln_grouped_linear_t *layer = NULL;
    d.size = offsetof(gln_dist_weights_t, wait) + 3;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &c, &layer), GLN_STATUS_INVALID_ARGUMENT,
                 "cfg->params.distributed->size");
    CHECK_STATUS(gln_grouped_linear_create(ctx, &c, &layer), GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    d.size = sizeof d + 8;
    CHECK_STATUS(gln_grouped_linear_create(ctx, &c, &layer), GLN_STATUS_INVALID_ARGUMENT, NOT_KNOWN);
    CHECK(layer == NULL);
    d.size = sizeof d;
    CHECK_OK(gln_grouped_linear_create(ctx, &c, &layer));
    CHECK_OK(gln_grouped_linear_destroy(layer));
    CHECK_OK(gln_sharded_weights_destroy(sw));
    gln_comm_destroy(comm);
}

GLN_TEST_MAIN(GLN_CASE(test_forward_args_size), GLN_CASE(test_grouped_gemm_args_size), GLN_CASE(test_grouped_gemm_args_v1),
              GLN_CASE(test_delayed_update_options_size), GLN_CASE(test_sharded_config_size),
              GLN_CASE(test_dist_weights_size))
