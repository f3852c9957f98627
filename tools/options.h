/* Option parsing helpers shared by the commands (getopt_long front end, typed values with
 * ranges, the recipe names).  Each helper prints its own one-line reason plus the "see
 * grouplin <cmd> --help" hint and returns CLI_USAGE on a bad value, CLI_OK otherwise. */
#ifndef GLN_TOOLS_OPTIONS_H
#define GLN_TOOLS_OPTIONS_H

#include <getopt.h>
#include <stdint.h>

#include "grouplin.h"

/* Print "grouplin <cmd>: <reason>" and the help hint (rank 0 only); returns CLI_USAGE. */
int opt_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Run getopt_long over argv (argv[0] = the command name).  For each recognised option calls
 * handle(code, optarg, user), which returns CLI_OK or CLI_USAGE.  --help (code 'h') prints
 * `help` to stdout and sets *help_shown.  Unknown options, missing arguments and stray
 * positional arguments are usage errors. */
typedef int (*opt_handler_fn)(int code, const char *arg, void *user);
int opt_parse(const char *cmd, int argc, char **argv, const struct option *longopts,
              const char *help, opt_handler_fn handle, void *user, int *help_shown);

int opt_i64(const char *cmd, const char *opt, const char *arg, int64_t lo, int64_t hi, int64_t *out);
int opt_double(const char *cmd, const char *opt, const char *arg, double lo, double hi, double *out);
/* arg must be one of names[0..n-1]; *out = its index. */
int opt_choice(const char *cmd, const char *opt, const char *arg, const char *const *names, int n,
               int *out);

/* The training / benchmark recipes by name. */
typedef struct tool_recipe {
    const char *name;         /* "fp32", "bf16", "fp8-delayed", "fp8-current", "mxfp8", "fp8-block" */
    gln_recipe_t recipe;
    gln_dtype_t act_dtype;    /* activations and working weights */
} tool_recipe_t;
enum { TOOL_MAX_RECIPES = 6 };
const tool_recipe_t *tool_recipe_find(const char *name);
/* Comma-separated list of recipe names (no duplicates). */
int opt_recipes(const char *cmd, const char *arg, const tool_recipe_t **out, int *count);

/* Rank of this process as announced by an MPI launcher's environment (0 when none), used to
 * keep messages printed before MPI_Init to one copy. */
int tool_env_rank(void);
/* Number of ranks announced by the launcher's environment (1 when not under mpirun). */
int tool_env_size(void);

#endif
