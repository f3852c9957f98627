/* The grouplin program: exit codes and the entry point of each command.
 *
 * Every command parses its own options (options.c helpers), returns CLI_OK, CLI_FAIL (a check
 * failed, the loss did not fall, the library reported an error) or CLI_USAGE (bad options:
 * a one-line reason and "see grouplin <cmd> --help" on stderr).  Commands never exit() directly
 * so MPI can always be finalized. */
#ifndef GLN_TOOLS_CLI_H
#define GLN_TOOLS_CLI_H

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);

#endif
