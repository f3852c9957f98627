/* Built without MPI: the MPI communicator reports GLN_STATUS_NOT_SUPPORTED. */
#include "comm/comm.h"
#include "common/error.h"

int gln_mpi_available(void) { return 0; }

gln_status_t gln_comm_create_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm) {
    (void)ctx;
    (void)mpi_comm;
    if (comm) *comm = NULL;
    return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                    "gln_comm_create_mpi: this build has no MPI (configure with GLN_MPI=ON and "
                    "install libopenmpi-dev)");
}

int gln_mpi_cuda_aware(void) { return 0; }

gln_mpi_path_t gln_mpi_choose_path(int on_host, int cuda_context, int cuda_aware) {
    if (on_host) return GLN_MPI_PATH_HOST;
    return cuda_context && cuda_aware ? GLN_MPI_PATH_DEVICE : GLN_MPI_PATH_STAGED;
}

gln_status_t gln_comm_create_mpi_as(gln_context_t *ctx, const void *mpi_comm, gln_mpi_path_t path,
                                    const gln_mpi_mover_t *mover, gln_comm_t **comm) {
    (void)path;
    (void)mover;
    return gln_comm_create_mpi(ctx, mpi_comm, comm);
}

/* No MPI communicator can exist in this build. */
gln_mpi_path_t gln_comm_mpi_path(const gln_comm_t *comm) {
    (void)comm;
    return GLN_MPI_PATH_HOST;
}

size_t gln_comm_mpi_stage_bytes(const gln_comm_t *comm) {
    (void)comm;
    return 0;
}
