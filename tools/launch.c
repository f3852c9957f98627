/* Single-process or mpirun launch (see launch.h). */
#include "launch.h"

#include <stdarg.h>
#include <stdio.h>

#include "cli.h"
#include "options.h"

#ifdef GLN_HAVE_MPI
#include <mpi.h>
#endif

void tool_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char rank[32] = "";
    if (tool_env_size() > 1) snprintf(rank, sizeof rank, " rank %d:", tool_env_rank());
    /* one write per message, so that lines of ranks sharing a terminal do not interleave */
    fprintf(stderr, "grouplin%s%s:%s %s\n", cmd ? " " : "", cmd ? cmd : "", rank, msg);
}

int tool_launch_init(int *argc, char ***argv, tool_launch_t *l) {
    l->mpi = 0;
    l->rank = 0;
    l->size = 1;
    l->comm = NULL;
    if (tool_env_size() > 1) {
#ifdef GLN_HAVE_MPI
        if (MPI_Init(argc, argv) != MPI_SUCCESS) {
            tool_error(NULL, "MPI_Init failed");
            return CLI_FAIL;
        }
        l->mpi = 1;
        gln_status_t st = gln_comm_create_mpi(NULL, NULL, &l->comm);
        if (st != GLN_STATUS_SUCCESS) {
            tool_error(NULL, "%s", gln_last_error());
            return CLI_FAIL;
        }
        l->rank = gln_comm_rank(l->comm);
        l->size = gln_comm_size(l->comm);
        return CLI_OK;
#else
        if (tool_env_rank() == 0)
            fprintf(stderr, "grouplin: note: built without MPI; each of the %d processes runs alone\n",
                    tool_env_size());
#endif
    }
    if (gln_comm_create_self(NULL, &l->comm) != GLN_STATUS_SUCCESS) {
        tool_error(NULL, "%s", gln_last_error());
        return CLI_FAIL;
    }
    return CLI_OK;
}

void tool_launch_fini(tool_launch_t *l) {
    gln_comm_destroy(l->comm);
    l->comm = NULL;
#ifdef GLN_HAVE_MPI
    if (l->mpi) MPI_Finalize();
#endif
    l->mpi = 0;
}

int tool_launch_any(tool_launch_t *l, int failed) {
    if (!l->comm || l->size == 1) return failed;
    int64_t mine = failed ? 1 : 0, any = 0;
    if (gln_comm_allreduce(l->comm, &mine, &any, 1, GLN_DTYPE_INT64, GLN_REDUCE_MAX) !=
        GLN_STATUS_SUCCESS)
        return 1;
    return any != 0;
}
