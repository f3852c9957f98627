/* Runner for the multi-rank tests (tests/mpi/test_*.c, launched by ctest under mpirun).
 *
 * Every rank runs every case; after each case the ranks agree (one allreduce) on how many of
 * them saw a failure, so they stay in step and rank 0 can print one line per case.  The exit
 * status is non-zero on EVERY rank when ANY rank failed a check, so mpirun fails either way.
 * Failure details are printed by the rank that saw them (stderr, prefixed by the harness). */
#ifndef GLN_TESTS_MPI_TEST_H
#define GLN_TESTS_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "harness.h"

static int gln_mpi_rank(void) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static int gln_mpi_size(void) {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

/* The MPI communicator of a test on a CPU context `ctx`: the host path, or with
 * GLN_TEST_MPI_STAGED=1 in the environment the staged device path over the CPU backend's own
 * copies, so the whole multi-rank suite also runs the staging code of a device context. */
static inline gln_status_t gln_test_mpi_comm(gln_context_t *ctx, gln_comm_t **comm) {
    const char *staged = getenv("GLN_TEST_MPI_STAGED");
    if (staged && staged[0] == '1') return gln_comm_create_mpi_as(ctx, NULL, GLN_MPI_PATH_STAGED, NULL, comm);
    return gln_comm_create_mpi(ctx, NULL, comm);
}

/* Number of ranks for which `local_failed` is true. */
static int gln_mpi_count_failed(int local_failed) {
    int mine = local_failed != 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static int gln_mpi_test_main(int argc, char **argv, const gln_test_case_t *cases, size_t count) {
    MPI_Init(&argc, &argv);
    int rank = gln_mpi_rank(), size = gln_mpi_size();
    const char *filter = argc > 1 ? argv[1] : NULL;
    size_t ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (filter && !strstr(cases[i].name, filter)) continue;
        int before = gln_test_failures();
        gln_clear_error();
        cases[i].fn();
        ran++;
        int failed_ranks = gln_mpi_count_failed(gln_test_failures() != before);
        if (rank == 0) {
            if (failed_ranks)
                printf("%-56s FAILED on %d of %d ranks\n", cases[i].name, failed_ranks, size);
            else
                printf("%-56s ok\n", cases[i].name);
            fflush(stdout);
        }
    }
    int total = 0, mine = gln_test_failures();
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%zu cases on %d ranks, %d failed checks\n", ran, size, total);
    MPI_Finalize();
    if (ran == 0) return 2;
    return total == 0 ? 0 : 1;
}

#define GLN_MPI_TEST_MAIN(...)                                                                  \
    int main(int argc, char **argv) {                                                           \
        static const gln_test_case_t cases_[] = {__VA_ARGS__};                                  \
        return gln_mpi_test_main(argc, argv, cases_, sizeof cases_ / sizeof cases_[0]);         \
    }

/* The main() of a multi-rank test of the CUDA backend: every rank exits 77 (skipped) when the
 * CUDA backend is not compiled in or sees no device (MPI initialized and finalized first, so the
 * launcher sees a clean exit). */
#define GLN_MPI_TEST_MAIN_CUDA(...)                                                             \
    int main(int argc, char **argv) {                                                           \
        static const gln_test_case_t cases_[] = {__VA_ARGS__};                                  \
        if (!gln_backend_available(GLN_BACKEND_CUDA)) {                                         \
            MPI_Init(&argc, &argv);                                                             \
            if (gln_mpi_rank() == 0) printf("skipped: the CUDA backend has no device\n");       \
            MPI_Finalize();                                                                     \
            return 77;                                                                          \
        }                                                                                       \
        return gln_mpi_test_main(argc, argv, cases_, sizeof cases_ / sizeof cases_[0]);         \
    }

#endif
