/* The grouplin program: exit codes and the entry point of each command.
 *
 * Every command parses its own options (options.c helpers), returns CLI_OK, CLI_FAIL (a check
 * failed, the loss did not fall, the library reported an error) or CLI_USAGE (bad options:
 * a one-line reason and "see grouplin <cmd> --help" on stderr).  Commands never exit() directly
 * so MPI can always be finalized. */
#ifndef GLN_TOOLS_CLI_H
#define GLN_TOOLS_CLI_H

#include <stddef.h>

#include "grouplin.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* The program's own buffers.  tool_alloc is calloc(count, size) (count or size 0: one byte)
 * that on failure records "cannot allocate N bytes of host memory for <what>" and returns NULL;
 * tool_oom records the same for a buffer allocated elsewhere and returns
 * GLN_STATUS_OUT_OF_MEMORY.  tool_last_error() is that detail once one was recorded (every such
 * failure ends the command), else gln_last_error(): what a failed step prints. */
void *tool_alloc(size_t count, size_t size, const char *what);
gln_status_t tool_oom(size_t bytes, const char *what);
const char *tool_last_error(void);
/* Record "<formatted message>" as the program's own failure (e.g. a kernel of train_ops_cuda.cu
 * that could not be launched) and return `status`. */
gln_status_t tool_fail(gln_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif
