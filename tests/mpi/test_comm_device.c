/* The MPI communicator's device-memory paths, run on the CPU with a fake "device": a mover whose
 * copies are host copies but which checks every pointer it is handed (sources and destinations
 * in the caller's "device" buffers or in the staging buffer it allocated), counts its calls, and
 * can report a graph capture or fail on one rank.  Also the path choice, and creation that one
 * rank's bad argument fails on every rank (a NULL out-pointer used to leave the others in
 * MPI_Comm_dup).  2, 3 and 4 ranks (ctest), every case bounded by the test's timeout.
 *
 * Data are small integers: every sum over ranks is exact, results are compared bit for bit with
 * the host path's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "common/error.h"
#include "mpi_test.h"

/* ---- the fake device ------------------------------------------------------------------------- */

enum { MAX_REGIONS = 8 };
typedef struct fake {
    struct {
        const char *p;
        size_t n;
    } dev[MAX_REGIONS];
    int ndev;
    const char *stage;
    size_t stage_n;
    int allocs, frees, to_host, to_backend, syncs;
    int capturing;           /* report a capture */
    int fail_alloc;          /* host_alloc fails */
    int fail_copy;           /* to_host fails */
    int bad_pointers;        /* a copy outside the registered buffers */
} fake_t;
static fake_t F;

static void fake_reset(void) { memset(&F, 0, sizeof F); }
static void fake_device(const void *p, size_t n) {
    if (F.ndev < MAX_REGIONS) F.dev[F.ndev].p = p, F.dev[F.ndev++].n = n;
}
static int in_dev(const void *p, size_t n) {
    for (int i = 0; i < F.ndev; i++)
        if ((const char *)p >= F.dev[i].p && (const char *)p + n <= F.dev[i].p + F.dev[i].n) return 1;
    return 0;
}
static int in_stage(const void *p, size_t n) {
    return F.stage && (const char *)p >= F.stage && (const char *)p + n <= F.stage + F.stage_n;
}

static gln_status_t f_alloc(gln_context_t *ctx, size_t bytes, void **ptr) {
    (void)ctx;
    *ptr = NULL;
    if (F.fail_alloc) return gln_fail(GLN_STATUS_OUT_OF_MEMORY, "fake device: no staging memory (%zu bytes)", bytes);
    F.allocs++;
    *ptr = malloc(bytes);
    F.stage = *ptr, F.stage_n = bytes;
    return GLN_STATUS_SUCCESS;
}
static void f_free(gln_context_t *ctx, void *ptr) {
    (void)ctx;
    if (!ptr) return;
    F.frees += ptr == F.stage;
    F.stage = NULL, F.stage_n = 0;
    free(ptr);
}
static gln_status_t f_to_host(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (F.fail_copy) return gln_fail(GLN_STATUS_BACKEND_ERROR, "fake device: copy to host failed");
    F.to_host++;
    F.bad_pointers += !in_dev(src, bytes) || !in_stage(dst, bytes);
    memcpy(dst, src, bytes);
    return GLN_STATUS_SUCCESS;
}
static gln_status_t f_to_backend(gln_context_t *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    F.to_backend++;
    F.bad_pointers += !in_dev(dst, bytes) || !in_stage(src, bytes);
    memcpy(dst, src, bytes);
    return GLN_STATUS_SUCCESS;
}
static gln_status_t f_sync(gln_context_t *ctx) {
    (void)ctx;
    F.syncs++;
    return GLN_STATUS_SUCCESS;
}
static gln_status_t f_capturing(gln_context_t *ctx, int *capturing) {
    (void)ctx;
    *capturing = F.capturing;
    return GLN_STATUS_SUCCESS;
}
static const gln_mpi_mover_t fake_mover = {f_alloc, f_free, f_to_host, f_to_backend, f_sync, f_capturing};

static gln_comm_t *comm_on(gln_mpi_path_t path, const gln_mpi_mover_t *mover) {
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_mpi_as(gln_test_cpu_context(), NULL, path, mover, &c));
    if (c) CHECK(gln_comm_mpi_path(c) == path && gln_comm_context(c) == gln_test_cpu_context());
    return c;
}

static double contribution(int r, size_t i) { return (double)(r + 1) * 3.0 + (double)(i % 97) - 40.0; }

static void fill(void *buf, gln_dtype_t dt, size_t n, int rank) {
    for (size_t i = 0; i < n; i++) {
        double v = contribution(rank, i);
        if (dt == GLN_DTYPE_INT32) ((int32_t *)buf)[i] = (int32_t)v;
        else if (dt == GLN_DTYPE_INT64) ((int64_t *)buf)[i] = (int64_t)v * ((int64_t)1 << 33);
        else gln_store(buf, dt, i, v);
    }
}

/* ---- the path choice ------------------------------------------------------------------------- */

static void test_choose_path(void) {
    for (int aware = 0; aware <= 1; aware++) {
        CHECK(gln_mpi_choose_path(1, 0, aware) == GLN_MPI_PATH_HOST);
        CHECK(gln_mpi_choose_path(0, 0, aware) == GLN_MPI_PATH_STAGED); /* not CUDA: always staged */
    }
    CHECK(gln_mpi_choose_path(0, 1, 0) == GLN_MPI_PATH_STAGED);
    CHECK(gln_mpi_choose_path(0, 1, 1) == GLN_MPI_PATH_DEVICE);
    /* a CPU context or none: the host path, whatever MPI says */
    gln_comm_t *c = NULL;
    CHECK_OK(gln_comm_create_mpi(gln_test_cpu_context(), NULL, &c));
    if (c) CHECK(gln_comm_mpi_path(c) == GLN_MPI_PATH_HOST && gln_comm_mpi_stage_bytes(c) == 0);
    CHECK_OK(gln_comm_destroy(c));
    CHECK(gln_mpi_cuda_aware() == 0 || gln_mpi_cuda_aware() == 1);
}

/* ---- every collective of the group and the layer, device path vs host path ------------------ */

/* Runs the collectives on "device" buffers over `dev` and on host buffers over `host`; the
 * results must match bit for bit. */
static void collectives_match(gln_comm_t *dev, gln_comm_t *host, const char *what) {
    int R = gln_comm_size(host), me = gln_comm_rank(host);
    static const gln_dtype_t dts[] = {GLN_DTYPE_FP32, GLN_DTYPE_INT32, GLN_DTYPE_INT64};
    static const size_t counts[] = {1, 7, 1000};
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 0; k < 3; k++) {
            gln_dtype_t dt = dts[d];
            size_t n = counts[k], es = gln_dtype_size(dt), all = (size_t)R * n * es;
            char *send = gln_test_alloc(all), *recv = gln_test_alloc(all), *ref = gln_test_alloc(all);
            fake_device(send, all);
            fake_device(recv, all);
            fill(send, dt, (size_t)R * n, me);
            char name[128];
            /* all-gather, then in place */
            memset(recv, 0xA5, all), memset(ref, 0x5A, all);
            CHECK_OK(gln_comm_allgather(dev, send, recv, n, dt));
            CHECK_OK(gln_comm_allgather(host, send, ref, n, dt));
            snprintf(name, sizeof name, "%s allgather %s x%zu", what, gln_dtype_name(dt), n);
            CHECK(gln_check_bitwise(name, recv, ref, all));
            memset(recv, 0xA5, all);
            memcpy(recv + (size_t)me * n * es, send, n * es);
            CHECK_OK(gln_comm_allgather(dev, recv + (size_t)me * n * es, recv, n, dt));
            snprintf(name, sizeof name, "%s allgather in place %s x%zu", what, gln_dtype_name(dt), n);
            CHECK(gln_check_bitwise(name, recv, ref, all));
            for (int op = 0; op <= 1; op++) {
                /* reduce-scatter (synchronous and the started form) */
                for (int start = 0; start <= 1; start++) {
                    memset(recv, 0xA5, n * es), memset(ref, 0x5A, n * es);
                    if (start) {
                        void *req = (void *)&req;
                        CHECK_OK(gln_comm_reduce_scatter_start(dev, send, recv, n, dt, op, &req));
                        CHECK_OK(gln_comm_wait(dev, req));
                    } else {
                        CHECK_OK(gln_comm_reduce_scatter(dev, send, recv, n, dt, op));
                    }
                    CHECK_OK(gln_comm_reduce_scatter(host, send, ref, n, dt, op));
                    snprintf(name, sizeof name, "%s reduce_scatter%s op %d %s x%zu", what, start ? "_start" : "",
                             op, gln_dtype_name(dt), n);
                    CHECK(gln_check_bitwise(name, recv, ref, n * es));
                }
                /* all-reduce, then in place */
                memset(recv, 0xA5, n * es), memset(ref, 0x5A, n * es);
                CHECK_OK(gln_comm_allreduce(dev, send, recv, n, dt, op));
                CHECK_OK(gln_comm_allreduce(host, send, ref, n, dt, op));
                snprintf(name, sizeof name, "%s allreduce op %d %s x%zu", what, op, gln_dtype_name(dt), n);
                CHECK(gln_check_bitwise(name, recv, ref, n * es));
                memcpy(recv, send, n * es);
                CHECK_OK(gln_comm_allreduce(dev, recv, recv, n, dt, op));
                snprintf(name, sizeof name, "%s allreduce in place op %d %s x%zu", what, op, gln_dtype_name(dt), n);
                CHECK(gln_check_bitwise(name, recv, ref, n * es));
            }
            CHECK(gln_guard_ok(send) && gln_guard_ok(recv) && gln_guard_ok(ref));
            gln_test_free(send), gln_test_free(recv), gln_test_free(ref);
            F.ndev = 0;
        }
    CHECK_OK(gln_comm_barrier(dev));
}

/* STAGED: every collective copies its input to the staging buffer and its result back, the
 * staging buffer is allocated once per growth (the largest message: a reduce-scatter's R+1
 * blocks of 1000 int64) and freed at destroy. */
static void test_staged_fake_device(void) {
    fake_reset();
    gln_comm_t *host = NULL, *dev = comm_on(GLN_MPI_PATH_STAGED, &fake_mover);
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &host));
    if (!dev || !host) return;
    CHECK(gln_comm_mpi_stage_bytes(dev) == 0); /* nothing before the first collective */
    collectives_match(dev, host, "staged");
    size_t R = (size_t)gln_comm_size(dev), largest = (R + 1) * 1000 * sizeof(int64_t);
    CHECK_MSG(gln_comm_mpi_stage_bytes(dev) == largest, "staging buffer %zu bytes, expected %zu",
              gln_comm_mpi_stage_bytes(dev), largest);
    CHECK_MSG(F.allocs >= 1 && F.allocs <= 18, "%d staging allocations for 9 (dtype, count) pairs (at most two growths each)", F.allocs);
    /* per pair: 2 all-gathers, 4 reduce-scatters, 4 all-reduces, each one copy each way */
    CHECK_MSG(F.to_host == 9 * 10 && F.to_backend == 9 * 10, "%d copies to host, %d back (expected 90 each)",
              F.to_host, F.to_backend);
    CHECK_MSG(F.bad_pointers == 0, "%d copies outside the device buffers or the staging buffer", F.bad_pointers);
    CHECK(F.syncs == 0); /* the copy to host is the synchronization */
    CHECK_OK(gln_comm_destroy(dev));
    CHECK_MSG(F.frees == F.allocs && F.stage == NULL, "%d staging buffers allocated, %d freed (the last at destroy)",
              F.allocs, F.frees);
    CHECK_OK(gln_comm_destroy(host));
}

/* DEVICE (CUDA-aware MPI): no staging, one synchronization of the stream per collective. */
static void test_device_path_fake(void) {
    fake_reset();
    gln_comm_t *host = NULL, *dev = comm_on(GLN_MPI_PATH_DEVICE, &fake_mover);
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &host));
    if (!dev || !host) return;
    collectives_match(dev, host, "device");
    CHECK(gln_comm_mpi_stage_bytes(dev) == 0 && F.allocs == 0 && F.to_host == 0 && F.to_backend == 0);
    CHECK_MSG(F.syncs == 9 * 10, "%d stream synchronizations, expected one per collective (90)", F.syncs);
    CHECK_OK(gln_comm_destroy(dev));
    CHECK_OK(gln_comm_destroy(host));
}

/* The staged path over the CPU backend's own copies (mover NULL): what runs on a GPU, with host
 * copies for the device's. */
static void test_staged_backend_copies(void) {
    fake_reset();
    gln_comm_t *host = NULL, *dev = comm_on(GLN_MPI_PATH_STAGED, NULL);
    CHECK_OK(gln_comm_create_mpi(NULL, NULL, &host));
    if (!dev || !host) return;
    collectives_match(dev, host, "staged (CPU backend copies)");
    CHECK(gln_comm_mpi_stage_bytes(dev) > 0);
    CHECK_OK(gln_comm_destroy(dev));
    CHECK_OK(gln_comm_destroy(host));
}

/* ---- one rank's local failure fails every rank, then the communicator works again ----------- */

static void expect_together(const char *what, gln_status_t st, gln_status_t want, int bad, const char *needle) {
    int me = gln_mpi_rank();
    CHECK_MSG(st == want, "%s: rank %d got %s, expected %s (%s)", what, me, gln_status_string(st),
              gln_status_string(want), gln_last_error());
    const char *msg = gln_last_error();
    if (me == bad) CHECK_MSG(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, msg, needle);
    else {
        char r[32];
        snprintf(r, sizeof r, "rank %d failed", bad);
        CHECK_MSG(strstr(msg, r) != NULL, "%s: message '%s' lacks '%s'", what, msg, r);
    }
}

static void local_failure(gln_mpi_path_t path, int which) {
    fake_reset();
    gln_comm_t *dev = comm_on(path, &fake_mover);
    if (!dev) return;
    int R = gln_comm_size(dev), me = gln_comm_rank(dev), bad = R - 1;
    enum { N = 64 };
    float *send = gln_test_alloc((size_t)R * N * sizeof(float)), *recv = gln_test_alloc((size_t)R * N * sizeof(float));
    fake_device(send, (size_t)R * N * sizeof(float));
    fake_device(recv, (size_t)R * N * sizeof(float));
    fill(send, GLN_DTYPE_FP32, (size_t)R * N, me);
    static const char *names[] = {"a graph capture", "no staging memory", "a failed copy"};
    static const gln_status_t codes[] = {GLN_STATUS_NOT_SUPPORTED, GLN_STATUS_OUT_OF_MEMORY, GLN_STATUS_BACKEND_ERROR};
    static const char *needles[] = {"graph capture", "no staging memory", "copy to host failed"};
    for (int op = 0; op < 3; op++) {
        /* an allocation fails only when the buffer grows: the all-reduce after the
         * reduce-scatter fits in what the in-step all-reduce left */
        if (which == 1 && op == 2) continue;
        if (me == bad) {
            F.capturing = which == 0;
            F.fail_alloc = which == 1;
            F.fail_copy = which == 2;
        }
        gln_status_t st = op == 0   ? gln_comm_allgather(dev, send, recv, N, GLN_DTYPE_FP32)
                          : op == 1 ? gln_comm_reduce_scatter(dev, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM)
                                    : gln_comm_allreduce(dev, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_MAX);
        char what[96];
        snprintf(what, sizeof what, "%s on rank %d, collective %d", names[which], bad, op);
        expect_together(what, st, codes[which], bad, needles[which]);
        F.capturing = F.fail_alloc = F.fail_copy = 0;
        /* in step again: the next collective runs on every rank */
        CHECK_OK(gln_comm_allreduce(dev, send, recv, N, GLN_DTYPE_FP32, GLN_REDUCE_SUM));
    }
    gln_test_free(send), gln_test_free(recv);
    CHECK_OK(gln_comm_destroy(dev));
}

static void test_capture_refused_on_one_rank(void) {
    local_failure(GLN_MPI_PATH_STAGED, 0);
    local_failure(GLN_MPI_PATH_DEVICE, 0);
}

static void test_staging_fails_on_one_rank(void) {
    local_failure(GLN_MPI_PATH_STAGED, 1);
    local_failure(GLN_MPI_PATH_STAGED, 2);
}

/* ---- creation: agreed before MPI_Comm_dup ---------------------------------------------------- */

/* One rank passes no out-pointer: it fails with INVALID_ARGUMENT, the others with the same
 * status naming it, instead of waiting in MPI_Comm_dup. */
static void test_create_null_out_on_one_rank(void) {
    int R = gln_mpi_size(), me = gln_mpi_rank();
    for (int bad = 0; bad < R; bad += R - 1 > 0 ? R - 1 : 1) {
        gln_comm_t *c = (gln_comm_t *)&c; /* poisoned */
        gln_status_t st = gln_comm_create_mpi(NULL, NULL, me == bad ? NULL : &c);
        expect_together("gln_comm_create_mpi with comm = NULL on one rank", st, GLN_STATUS_INVALID_ARGUMENT, bad,
                        "comm must not be NULL");
        if (me != bad) CHECK(c == NULL);
        /* the world is in step: a collective after it */
        gln_comm_t *w = NULL;
        CHECK_OK(gln_comm_create_mpi(NULL, NULL, &w));
        CHECK_OK(gln_comm_barrier(w));
        CHECK_OK(gln_comm_destroy(w));
        if (R == 1) break;
    }
}

/* A device path without a context, or the host path on a non-host context, on one rank. */
static void test_create_bad_path_on_one_rank(void) {
    int R = gln_mpi_size(), me = gln_mpi_rank(), bad = R - 1;
    gln_comm_t *c = NULL;
    gln_status_t st = me == bad ? gln_comm_create_mpi_as(NULL, NULL, GLN_MPI_PATH_STAGED, NULL, &c)
                                : gln_comm_create_mpi_as(gln_test_cpu_context(), NULL, GLN_MPI_PATH_STAGED, NULL, &c);
    expect_together("staged path without a context on one rank", st, GLN_STATUS_INVALID_ARGUMENT, bad,
                    "need a context");
    CHECK(c == NULL);
    st = gln_comm_create_mpi_as(gln_test_cpu_context(), NULL, me == 0 ? (gln_mpi_path_t)7 : GLN_MPI_PATH_HOST,
                                NULL, &c);
    expect_together("path 7 on rank 0", st, GLN_STATUS_INVALID_ARGUMENT, 0, "path 7");
    CHECK(c == NULL);
}

GLN_MPI_TEST_MAIN(GLN_CASE(test_choose_path), GLN_CASE(test_staged_fake_device), GLN_CASE(test_device_path_fake),
                  GLN_CASE(test_staged_backend_copies), GLN_CASE(test_capture_refused_on_one_rank),
                  GLN_CASE(test_staging_fails_on_one_rank), GLN_CASE(test_create_null_out_on_one_rank),
                  GLN_CASE(test_create_bad_path_on_one_rank))
