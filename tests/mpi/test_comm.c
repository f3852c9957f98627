/* The MPI communicator on 2 and 4 ranks: all-gather, reduce-scatter, all-reduce (sum and max,
 * fp32 / int32 / int64), in-place forms, the non-blocking reduce-scatter, sub-communicators,
 * and the refusals (16-bit reductions, counts past INT_MAX) that must fail identically on every
 * rank without entering a collective.
 *
 * Data are small integers, so every sum over ranks is exact in FP32 and checked bit for bit
 * against a float64 reference computed from the known per-rank inputs. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "mpi_test.h"

static gln_comm_t *make_world(void) {
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &c));
    return c;
}

/* What rank r contributes at index i (small integers, distinct per rank and index). */
static double contribution(int r, size_t i) { return (double)(r + 1) * 3.0 + (double)(i % 97) - 40.0; }

static void test_rank_size(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    CHECK(gln_comm_rank(c) == gln_mpi_rank());
    CHECK(gln_comm_size(c) == gln_mpi_size());
    CHECK_OK(gln_comm_barrier(c));
    CHECK(gln_mpi_available() == 1);
    CHECK_OK(gln_comm_destroy(c));
}

static void fill(void *buf, gln_dtype_t dt, size_t n, int rank) {
    for (size_t i = 0; i < n; i++) {
        double v = contribution(rank, i);
        if (dt == GLN_DTYPE_INT32)
            ((int32_t *)buf)[i] = (int32_t)v;
        else if (dt == GLN_DTYPE_INT64)
            ((int64_t *)buf)[i] = (int64_t)v * ((int64_t)1 << 33); /* needs 64 bits */
        else
            gln_store(buf, dt, i, v);
    }
}

static double value(const void *buf, gln_dtype_t dt, size_t i) {
    if (dt == GLN_DTYPE_INT32) return ((const int32_t *)buf)[i];
    if (dt == GLN_DTYPE_INT64) return (double)((const int64_t *)buf)[i];
    return gln_load(buf, dt, i);
}

static double scale_of(gln_dtype_t dt) { return dt == GLN_DTYPE_INT64 ? (double)((int64_t)1 << 33) : 1.0; }

static void test_allgather(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    int R = gln_comm_size(c), me = gln_comm_rank(c);
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_BF16, GLN_DTYPE_INT32,
                                      GLN_DTYPE_INT64};
    static const size_t counts[] = {1, 7, 1000};
    for (size_t d = 0; d < 4; d++) {
        for (size_t k = 0; k < 3; k++) {
            gln_dtype_t dt = dts[d];
            size_t n = counts[k], es = gln_dtype_size(dt);
            void *send = gln_test_alloc(n * es), *recv = gln_test_alloc((size_t)R * n * es);
            fill(send, dt, n, me);
            memset(recv, 0xA5, (size_t)R * n * es);
            CHECK_OK(gln_comm_allgather(c, send, recv, n, dt));
            int bad = 0;
            for (int r = 0; r < R; r++)
                for (size_t i = 0; i < n; i++)
                    bad += value(recv, dt, (size_t)r * n + i) != contribution(r, i) * scale_of(dt);
            CHECK_MSG(bad == 0, "allgather %s count %zu: %d wrong elements", gln_dtype_name(dt), n, bad);
            CHECK(gln_guard_ok(recv));
            /* In place: this rank's block already sits at recv + rank·n. */
            memset(recv, 0xA5, (size_t)R * n * es);
            memcpy((char *)recv + (size_t)me * n * es, send, n * es);
            CHECK_OK(gln_comm_allgather(c, (char *)recv + (size_t)me * n * es, recv, n, dt));
            for (int r = 0; r < R; r++)
                for (size_t i = 0; i < n; i++)
                    bad += value(recv, dt, (size_t)r * n + i) != contribution(r, i) * scale_of(dt);
            CHECK_MSG(bad == 0, "in-place allgather %s count %zu", gln_dtype_name(dt), n);
            gln_test_free(send);
            gln_test_free(recv);
        }
    }
    CHECK_OK(gln_comm_destroy(c));
}

/* Block b of rank r's send: contribution(r, i) + b (so each block differs). */
static void *reduce_scatter_input(gln_dtype_t dt, size_t n, int R, int me) {
    size_t es = gln_dtype_size(dt);
    unsigned char *send = gln_test_alloc((size_t)R * n * es);
    for (int b = 0; b < R; b++) {
        fill(send + (size_t)b * n * es, dt, n, me);
        for (size_t i = 0; i < n; i++) {
            size_t k = (size_t)b * n + i;
            if (dt == GLN_DTYPE_INT32) ((int32_t *)send)[k] += b;
            else if (dt == GLN_DTYPE_INT64) ((int64_t *)send)[k] += b;
            else gln_store(send, dt, k, gln_load(send, dt, k) + b);
        }
    }
    return send;
}

static double expected_reduction(gln_dtype_t dt, gln_reduce_op_t op, int R, int block, size_t i) {
    double acc = op == GLN_REDUCE_SUM ? 0.0 : -1e300;
    for (int r = 0; r < R; r++) {
        double v = contribution(r, i) * scale_of(dt) + block;
        acc = op == GLN_REDUCE_SUM ? acc + v : (v > acc ? v : acc);
    }
    return acc;
}

static void test_reduce_scatter(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    int R = gln_comm_size(c), me = gln_comm_rank(c);
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_INT32, GLN_DTYPE_INT64};
    static const size_t counts[] = {1, 13, 1000};
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 0; k < 3; k++)
            for (int op = 0; op <= 1; op++) {
                gln_dtype_t dt = dts[d];
                size_t n = counts[k], es = gln_dtype_size(dt);
                void *send = reduce_scatter_input(dt, n, R, me);
                void *recv = gln_test_alloc(n * es);
                memset(recv, 0xA5, n * es);
                CHECK_OK(gln_comm_reduce_scatter(c, send, recv, n, dt, (gln_reduce_op_t)op));
                int bad = 0;
                for (size_t i = 0; i < n; i++)
                    bad += value(recv, dt, i) != expected_reduction(dt, (gln_reduce_op_t)op, R, me, i);
                CHECK_MSG(bad == 0, "reduce_scatter %s op %d count %zu: %d wrong", gln_dtype_name(dt),
                          op, n, bad);
                CHECK(gln_guard_ok(recv));
                gln_test_free(send);
                gln_test_free(recv);
            }
    CHECK_OK(gln_comm_destroy(c));
}

/* The non-blocking form (used by async finalize) gives the same result after wait. */
static void test_reduce_scatter_async(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    int R = gln_comm_size(c), me = gln_comm_rank(c);
    size_t n = 333;
    float *send = reduce_scatter_input(GLN_DTYPE_FP32, n, R, me);
    float *recv = gln_test_alloc(n * sizeof(float));
    gln_poison(recv, GLN_DTYPE_FP32, n);
    void *req = NULL;
    CHECK_OK(gln_comm_reduce_scatter_start(c, send, recv, n, GLN_DTYPE_FP32, GLN_REDUCE_SUM, &req));
    CHECK(req != NULL); /* MPI really runs it in the background */
    /* Another collective may run while it is in flight (same order on every rank). */
    CHECK_OK(gln_comm_barrier(c));
    CHECK_OK(gln_comm_wait(c, req));
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += recv[i] != expected_reduction(GLN_DTYPE_FP32, GLN_REDUCE_SUM, R, me, i);
    CHECK_MSG(bad == 0, "async reduce_scatter: %d wrong", bad);
    CHECK_OK(gln_comm_wait(c, NULL));
    gln_test_free(send);
    gln_test_free(recv);
    CHECK_OK(gln_comm_destroy(c));
}

static void test_allreduce(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    int R = gln_comm_size(c), me = gln_comm_rank(c);
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_INT32, GLN_DTYPE_INT64};
    size_t n = 517;
    for (size_t d = 0; d < 3; d++)
        for (int op = 0; op <= 1; op++)
            for (int in_place = 0; in_place <= 1; in_place++) {
                gln_dtype_t dt = dts[d];
                size_t es = gln_dtype_size(dt);
                void *send = gln_test_alloc(n * es), *recv = gln_test_alloc(n * es);
                fill(send, dt, n, me);
                if (in_place) memcpy(recv, send, n * es);
                else memset(recv, 0xA5, n * es);
                CHECK_OK(gln_comm_allreduce(c, in_place ? recv : send, recv, n, dt, (gln_reduce_op_t)op));
                int bad = 0;
                for (size_t i = 0; i < n; i++)
                    bad += value(recv, dt, i) != expected_reduction(dt, (gln_reduce_op_t)op, R, 0, i);
                CHECK_MSG(bad == 0, "allreduce %s op %d in_place %d: %d wrong", gln_dtype_name(dt), op,
                          in_place, bad);
                gln_test_free(send);
                gln_test_free(recv);
            }
    CHECK_OK(gln_comm_destroy(c));
}

/* A communicator over a split of the world reduces over its members only. */
static void test_sub_communicator(void) {
    int wr = gln_mpi_rank(), ws = gln_mpi_size();
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &half);
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_mpi(NULL, &half, &c));
    if (c) {
        int members = ws / 2 + (wr % 2 == 0 ? ws % 2 : 0);
        CHECK(gln_comm_size(c) == members);
        CHECK(gln_comm_rank(c) == wr / 2);
        int64_t mine = wr, sum = -1, want = 0;
        for (int r = wr % 2; r < ws; r += 2) want += r;
        CHECK_OK(gln_comm_allreduce(c, &mine, &sum, 1, GLN_DTYPE_INT64, GLN_REDUCE_SUM));
        CHECK_MSG(sum == want, "sub-communicator sum %lld != %lld", (long long)sum, (long long)want);
        CHECK_OK(gln_comm_destroy(c));
    }
    /* The library duplicated it: freeing ours after destroy is legal and leaves it untouched. */
    MPI_Comm_free(&half);
    MPI_Comm null_comm = MPI_COMM_NULL;
    CHECK_STATUS(gln_comm_create_mpi(NULL, &null_comm, &c), GLN_STATUS_INVALID_ARGUMENT, "MPI_COMM_NULL");
    CHECK(c == NULL);
}

/* Refusals happen before any collective, identically on every rank: nobody hangs. */
static void test_refusals(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    float a[4] = {0}, b[64] = {0};
    CHECK_STATUS(gln_comm_allreduce(c, a, b, 4, GLN_DTYPE_BF16, GLN_REDUCE_SUM),
                 GLN_STATUS_NOT_SUPPORTED, "bf16");
    CHECK_STATUS(gln_comm_reduce_scatter(c, b, a, 4, GLN_DTYPE_FP16, GLN_REDUCE_MAX),
                 GLN_STATUS_NOT_SUPPORTED, "fp16");
    /* MPI counts are ints: a message of INT_MAX + 1 elements is refused without touching the
     * (small) buffers — the check precedes any access. */
    size_t huge = (size_t)INT_MAX + 1;
    CHECK_STATUS(gln_comm_allreduce(c, a, b, huge, GLN_DTYPE_FP32, GLN_REDUCE_SUM),
                 GLN_STATUS_NOT_SUPPORTED, "INT_MAX");
    CHECK_STATUS(gln_comm_allgather(c, a, b, huge, GLN_DTYPE_INT32), GLN_STATUS_NOT_SUPPORTED,
                 "INT_MAX");
    CHECK_STATUS(gln_comm_reduce_scatter(c, a, b, huge, GLN_DTYPE_FP32, GLN_REDUCE_SUM),
                 GLN_STATUS_NOT_SUPPORTED, "split the message");
    /* The communicator still works afterwards. */
    int32_t one = 1, n = 0;
    CHECK_OK(gln_comm_allreduce(c, &one, &n, 1, GLN_DTYPE_INT32, GLN_REDUCE_SUM));
    CHECK(n == gln_comm_size(c));
    CHECK_OK(gln_comm_destroy(c));
}

/* White box: an MPI failure comes back as GLN_STATUS_COMM_ERROR carrying MPI's own message
 * (the duplicate communicator has MPI_ERRORS_RETURN, so nothing aborts).  The dispatcher would
 * refuse a bf16 sum, so the transport is called directly: MPI rejects the null datatype on
 * every rank before any communication. */
static void test_mpi_error_translation(void) {
    gln_comm_t *c = make_world();
    if (!c) return;
    float a[4] = {1, 2, 3, 4}, b[4];
    CHECK_STATUS(c->ops->allreduce(c, a, b, 4, GLN_DTYPE_BF16, GLN_REDUCE_SUM), GLN_STATUS_COMM_ERROR,
                 "gln_comm_allreduce: MPI_Allreduce failed: ");
    CHECK_MSG(strstr(gln_last_error(), "MPI error") != NULL, "no MPI error code in '%s'",
              gln_last_error());
    /* Still usable afterwards. */
    CHECK_OK(gln_comm_allreduce(c, a, b, 4, GLN_DTYPE_FP32, GLN_REDUCE_MAX));
    CHECK(b[3] == 4.0f);
    CHECK_OK(gln_comm_destroy(c));
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_mpi_error_translation), GLN_CASE(test_rank_size), GLN_CASE(test_allgather), GLN_CASE(test_reduce_scatter),
                  GLN_CASE(test_reduce_scatter_async), GLN_CASE(test_allreduce),
                  GLN_CASE(test_sub_communicator), GLN_CASE(test_refusals))
