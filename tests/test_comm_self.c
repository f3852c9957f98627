/* The self communicator (one rank) and the argument checks every communicator shares.
 *
 * Over one rank every collective is the identity: allgather and reduce-scatter copy, sums and
 * maxima of one contribution are the contribution.  Checks are exact (bitwise). */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"

static gln_comm_t *make_self(void) {
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_self(NULL, &c));
    return c;
}

static void test_rank_size(void) {
    gln_comm_t *c = make_self();
    CHECK(c != NULL);
    CHECK(gln_comm_rank(c) == 0);
    CHECK(gln_comm_size(c) == 1);
    CHECK_OK(gln_comm_barrier(c));
    CHECK(gln_comm_rank(NULL) == -1);
    CHECK(gln_comm_size(NULL) == 0);
    CHECK_OK(gln_comm_destroy(c));
    CHECK_OK(gln_comm_destroy(NULL));
}

/* Allgather copies any dtype byte for byte, including FP8 codes and NaN payloads. */
static void test_allgather_copies(void) {
    gln_comm_t *c = make_self();
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_FP8_E4M3,
                                      GLN_DTYPE_E8M0, GLN_DTYPE_INT64};
    gln_rng_t rng = gln_rng_seed(11);
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        size_t count = 37, bytes = count * gln_dtype_size(dts[d]);
        unsigned char *send = gln_test_alloc(bytes), *recv = gln_test_alloc(bytes);
        for (size_t i = 0; i < bytes; i++) send[i] = (unsigned char)gln_rng_u64(&rng);
        memset(recv, 0xA5, bytes);
        CHECK_OK(gln_comm_allgather(c, send, recv, count, dts[d]));
        CHECK(gln_check_bitwise(gln_dtype_name(dts[d]), recv, send, bytes));
        CHECK(gln_guard_ok(recv));
        /* In place: send == recv + rank·count. */
        CHECK_OK(gln_comm_allgather(c, recv, recv, count, dts[d]));
        CHECK(gln_check_bitwise("in place", recv, send, bytes));
        gln_test_free(send);
        gln_test_free(recv);
    }
    CHECK_OK(gln_comm_destroy(c));
}

static void test_reductions_identity(void) {
    gln_comm_t *c = make_self();
    enum { N = 19 };
    float fs[N], fr[N];
    int32_t is[N], ir[N];
    int64_t ls[N], lr[N];
    for (int i = 0; i < N; i++) {
        fs[i] = (float)(i - 9) * 0.375f;
        is[i] = i * 1000 - 7;
        ls[i] = (int64_t)i << 40;
    }
    for (int op = 0; op <= 1; op++) {
        gln_poison(fr, GLN_DTYPE_FP32, N);
        memset(ir, 0xA5, sizeof ir);
        memset(lr, 0xA5, sizeof lr);
        CHECK_OK(gln_comm_allreduce(c, fs, fr, N, GLN_DTYPE_FP32, (gln_reduce_op_t)op));
        CHECK(gln_check_bitwise("allreduce fp32", fr, fs, sizeof fs));
        CHECK_OK(gln_comm_allreduce(c, is, ir, N, GLN_DTYPE_INT32, (gln_reduce_op_t)op));
        CHECK(gln_check_bitwise("allreduce int32", ir, is, sizeof is));
        CHECK_OK(gln_comm_allreduce(c, ls, lr, N, GLN_DTYPE_INT64, (gln_reduce_op_t)op));
        CHECK(gln_check_bitwise("allreduce int64", lr, ls, sizeof ls));
        gln_poison(fr, GLN_DTYPE_FP32, N);
        CHECK_OK(gln_comm_reduce_scatter(c, fs, fr, N, GLN_DTYPE_FP32, (gln_reduce_op_t)op));
        CHECK(gln_check_bitwise("reduce_scatter fp32", fr, fs, sizeof fs));
    }
    /* In-place allreduce. */
    memcpy(fr, fs, sizeof fs);
    CHECK_OK(gln_comm_allreduce(c, fr, fr, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
    CHECK(gln_check_bitwise("allreduce in place", fr, fs, sizeof fs));
    CHECK_OK(gln_comm_destroy(c));
}

/* Empty messages are legal and may use NULL buffers. */
static void test_empty(void) {
    gln_comm_t *c = make_self();
    CHECK_OK(gln_comm_allgather(c, NULL, NULL, 0, GLN_DTYPE_FP32));
    CHECK_OK(gln_comm_reduce_scatter(c, NULL, NULL, 0, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
    CHECK_OK(gln_comm_allreduce(c, NULL, NULL, 0, GLN_DTYPE_INT32, GLN_REDUCE_MAX));
    CHECK_OK(gln_comm_destroy(c));
}

static void test_invalid_arguments(void) {
    gln_comm_t *c = make_self();
    float a[8] = {0}, b[8] = {0};
    CHECK_STATUS(gln_comm_create_self(NULL, NULL), GLN_STATUS_INVALID_ARGUMENT, "comm");
    CHECK_STATUS(gln_comm_allgather(NULL, a, b, 1, GLN_DTYPE_FP32), GLN_STATUS_INVALID_ARGUMENT,
                 "gln_comm_allgather");
    CHECK_STATUS(gln_comm_allgather(c, NULL, b, 1, GLN_DTYPE_FP32), GLN_STATUS_INVALID_ARGUMENT,
                 "send");
    CHECK_STATUS(gln_comm_allgather(c, a, NULL, 1, GLN_DTYPE_FP32), GLN_STATUS_INVALID_ARGUMENT,
                 "recv");
    CHECK_STATUS(gln_comm_allgather(c, a, b, 1, (gln_dtype_t)99), GLN_STATUS_INVALID_ARGUMENT,
                 "dtype");
    CHECK_STATUS(gln_comm_allgather(c, a, b, SIZE_MAX / 2, GLN_DTYPE_FP32),
                 GLN_STATUS_INVALID_ARGUMENT, "overflows");
    /* Partial overlap is neither distinct buffers nor the in-place form. */
    CHECK_STATUS(gln_comm_allgather(c, a + 1, a, 4, GLN_DTYPE_FP32), GLN_STATUS_INVALID_ARGUMENT,
                 "overlap");
    CHECK_STATUS(gln_comm_allreduce(c, a + 1, a, 4, GLN_DTYPE_FP32, GLN_REDUCE_SUM),
                 GLN_STATUS_INVALID_ARGUMENT, "overlap");
    CHECK_STATUS(gln_comm_reduce_scatter(c, a, a, 4, GLN_DTYPE_FP32, GLN_REDUCE_SUM),
                 GLN_STATUS_INVALID_ARGUMENT, "overlap");
    CHECK_STATUS(gln_comm_allreduce(c, a, b, 4, GLN_DTYPE_FP32, (gln_reduce_op_t)7),
                 GLN_STATUS_INVALID_ARGUMENT, "op");
    /* Reductions in 16-bit floats would round at every step: refused, not approximated. */
    CHECK_STATUS(gln_comm_allreduce(c, a, b, 4, GLN_DTYPE_BF16, GLN_REDUCE_SUM),
                 GLN_STATUS_NOT_SUPPORTED, "bf16");
    CHECK_STATUS(gln_comm_reduce_scatter(c, a, b, 4, GLN_DTYPE_FP16, GLN_REDUCE_SUM),
                 GLN_STATUS_NOT_SUPPORTED, "fp16");
    CHECK_STATUS(gln_comm_allreduce(c, a, b, 4, GLN_DTYPE_FP8_E4M3, GLN_REDUCE_MAX),
                 GLN_STATUS_NOT_SUPPORTED, "e4m3");
    CHECK_STATUS(gln_comm_barrier(NULL), GLN_STATUS_INVALID_ARGUMENT, "comm");
    CHECK_OK(gln_comm_destroy(c));
}

/* Without MPI compiled in the MPI communicator says so; with it, MPI is not initialized in this
 * single-process test, which must be reported (not crash). */
static void test_mpi_entry(void) {
    gln_comm_t *c = (gln_comm_t *)&c;
    gln_status_t st = gln_comm_create_mpi(NULL, NULL, &c);
    CHECK(st != GLN_STATUS_SUCCESS);
    CHECK(c == NULL);
    if (gln_mpi_available())
        CHECK_STATUS(st, GLN_STATUS_INVALID_STATE, "MPI_Init");
    else
        CHECK_STATUS(st, GLN_STATUS_NOT_SUPPORTED, "MPI");
    CHECK_STATUS(gln_comm_create_mpi(NULL, NULL, NULL), gln_mpi_available() ? GLN_STATUS_INVALID_ARGUMENT
                                                                     : GLN_STATUS_NOT_SUPPORTED,
                 NULL);
}

/* A communicator is bound to a context (NULL: host memory); without NCCL its entry points say
 * so, and with it a CPU context is refused (NCCL moves device memory). */
static void test_context_binding_and_nccl_entry(void) {
    gln_context_t *ctx = NULL;
    CHECK_OK(gln_context_create(NULL, &ctx));
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_self(ctx, &c));
    CHECK(gln_comm_context(c) == ctx);
    float a[3] = {1, 2, 3}, b[3] = {0};
    CHECK_OK(gln_comm_allreduce(c, a, b, 3, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_OK(gln_comm_destroy(c));
    CHECK(gln_comm_context(NULL) == NULL);
    gln_nccl_id_t id;
    c = (gln_comm_t *)&id; /* must be reset to NULL */
    memset(&id, 0, sizeof id);
    CHECK_STATUS(gln_comm_create_nccl(ctx, &id, 0, 1, &c), GLN_STATUS_NOT_SUPPORTED,
                 gln_nccl_available() ? "CUDA context" : "no NCCL");
    CHECK(c == NULL);
    if (!gln_nccl_available()) {
        CHECK_STATUS(gln_nccl_id_create(&id), GLN_STATUS_NOT_SUPPORTED, "NCCL");
        CHECK_STATUS(gln_comm_create_nccl_mpi(ctx, NULL, &c), GLN_STATUS_NOT_SUPPORTED, "NCCL");
    }
    CHECK_OK(gln_context_destroy(ctx));
}

GLN_TEST_MAIN(GLN_CASE(test_rank_size), GLN_CASE(test_allgather_copies),
              GLN_CASE(test_reductions_identity), GLN_CASE(test_empty),
              GLN_CASE(test_invalid_arguments), GLN_CASE(test_mpi_entry),
              GLN_CASE(test_context_binding_and_nccl_entry))
