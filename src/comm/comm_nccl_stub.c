/* Built without NCCL: the NCCL communicator reports GLN_STATUS_NOT_SUPPORTED. */
#include "common/error.h"

static gln_status_t no_nccl(const char *fn) {
    return gln_fail(GLN_STATUS_NOT_SUPPORTED,
                    "%s: this build has no NCCL (configure with GLN_CUDA=ON and GLN_NCCL=ON; nccl.h "
                    "and libnccl come with the CUDA toolkit or the libnccl-dev package)",
                    fn);
}

int gln_nccl_available(void) { return 0; }

gln_status_t gln_nccl_id_create(gln_nccl_id_t *id) {
    (void)id;
    return no_nccl("gln_nccl_id_create");
}

gln_status_t gln_comm_create_nccl(gln_context_t *ctx, const gln_nccl_id_t *id, int rank, int size,
                                  gln_comm_t **comm) {
    (void)ctx;
    (void)id;
    (void)rank;
    (void)size;
    if (comm) *comm = NULL;
    return no_nccl("gln_comm_create_nccl");
}

gln_status_t gln_comm_create_nccl_mpi(gln_context_t *ctx, const void *mpi_comm, gln_comm_t **comm) {
    (void)ctx;
    (void)mpi_comm;
    if (comm) *comm = NULL;
    return no_nccl("gln_comm_create_nccl_mpi");
}
