/* grouplin: the command-line program (train demo, benchmark, numerics self-check).
 * Dispatches to the command; `grouplin --help` and `grouplin --version` are handled here. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t commands[] = {
    {"train", cmd_train, "train a small MoE MLP on a teacher task, per recipe; loss curves"},
    {"bench", cmd_bench, "grouped linear forward+backward throughput vs OpenBLAS sgemm"},
    {"check", cmd_check, "numerics self-check (conversions, round trips, a tiny layer)"},
};
enum { NUM_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
    fprintf(out, "usage: grouplin [--help | --version] <command> [options]\n\ncommands:\n");
    for (int i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'grouplin <command> --help' describes each command's options.\n"
                 "exit status: 0 ok, 1 failure, 2 usage error\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        if (tool_env_rank() == 0) {
            fprintf(stderr, "grouplin: no command given\n");
            usage(stderr);
        }
        return CLI_USAGE;
    }
    const char *arg = argv[1];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
        int ma, mi, pa;
        gln_version(&ma, &mi, &pa);
        printf("grouplin %d.%d.%d (cuda backend %s, mpi %s)\n", ma, mi, pa,
               gln_backend_available(GLN_BACKEND_CUDA) ? "available" : "not available",
               gln_mpi_available() ? "built" : "not built");
        return CLI_OK;
    }
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(arg, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    if (tool_env_rank() == 0) {
        if (arg[0] == '-')
            fprintf(stderr, "grouplin: unknown option '%s'\nsee grouplin --help\n", arg);
        else
            fprintf(stderr, "grouplin: unknown command '%s'\nsee grouplin --help\n", arg);
    }
    return CLI_USAGE;
}
