/* How the program runs: as one process (self communicator, MPI never touched) or as one rank
 * of an mpirun job (MPI_Init here, a grouplin MPI communicator over MPI_COMM_WORLD).  An mpirun
 * launch is recognised from the launcher's environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, ...),
 * so a plain `grouplin train` never initialises MPI. */
#ifndef GLN_TOOLS_LAUNCH_H
#define GLN_TOOLS_LAUNCH_H

#include "grouplin.h"

typedef struct tool_launch {
    int mpi;           /* MPI_Init was called by us */
    int rank, size;
    gln_comm_t *comm;  /* self or MPI */
} tool_launch_t;

/* Returns CLI_OK or CLI_FAIL (message printed). */
int tool_launch_init(int *argc, char ***argv, tool_launch_t *l);
void tool_launch_fini(tool_launch_t *l);
/* A failure on stderr: "grouplin <cmd>: <message>" (cmd NULL: "grouplin: <message>"), and under
 * a launcher of more than one rank "grouplin <cmd>: rank R: <message>".  Every rank prints its
 * own failures, so a failure of one rank alone is heard (mpirun forwards each rank's stderr;
 * the others then stop through tool_launch_any without a word of their own). */
void tool_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* An "any rank failed" vote: returns nonzero on every rank when `failed` is set on any. */
int tool_launch_any(tool_launch_t *l, int failed);

#endif
