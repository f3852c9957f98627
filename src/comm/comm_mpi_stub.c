/* Built without MPI: the MPI communicator reports GLN_STATUS_NOT_SUPPORTED. */
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
