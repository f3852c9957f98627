/* Option parsing helpers (see options.h). */
#define _POSIX_C_SOURCE 200809L
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const tool_recipe_t recipes[TOOL_MAX_RECIPES] = {
    {"fp32", GLN_RECIPE_NONE, GLN_DTYPE_FP32},
    {"bf16", GLN_RECIPE_NONE, GLN_DTYPE_BF16},
    {"fp8-delayed", GLN_RECIPE_FP8_DELAYED, GLN_DTYPE_BF16},
    {"fp8-current", GLN_RECIPE_FP8_CURRENT, GLN_DTYPE_BF16},
    {"mxfp8", GLN_RECIPE_MXFP8, GLN_DTYPE_BF16},
    {"fp8-block", GLN_RECIPE_FP8_BLOCK, GLN_DTYPE_BF16},
};

static int env_int(const char *const *names, int fallback) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return fallback;
}

int tool_env_rank(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "MV2_COMM_WORLD_RANK", NULL};
    return env_int(names, 0);
}

int tool_env_size(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                        NULL};
    int n = env_int(names, 1);
    return n >= 1 ? n : 1;
}

int opt_usage_error(const char *cmd, const char *fmt, ...) {
    if (tool_env_rank() != 0) return CLI_USAGE;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "grouplin %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nsee grouplin %s --help\n", cmd);
    return CLI_USAGE;
}

/* A short-option string (":h" + one letter per short option) built from longopts. */
static void short_opts(const struct option *longopts, char *buf, size_t cap) {
    size_t n = 0;
    buf[n++] = ':';
    for (const struct option *o = longopts; o->name && n + 3 < cap; o++) {
        if (o->flag || o->val <= 0 || o->val >= 128) continue;
        buf[n++] = (char)o->val;
        if (o->has_arg == required_argument) buf[n++] = ':';
    }
    buf[n] = '\0';
}

int opt_parse(const char *cmd, int argc, char **argv, const struct option *longopts,
              const char *help, opt_handler_fn handle, void *user, int *help_shown) {
    char shorts[128];
    short_opts(longopts, shorts, sizeof shorts);
    *help_shown = 0;
    opterr = 0;
    optind = 0; /* glibc: full re-initialisation */
    int c;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (c == 'h') {
            if (tool_env_rank() == 0) fputs(help, stdout);
            *help_shown = 1;
            return CLI_OK;
        }
        if (c == ':') return opt_usage_error(cmd, "option '%s' needs a value", argv[optind - 1]);
        if (c == '?') {
            if (optopt > 0 && optopt < 128 && argv[optind - 1][1] != '-')
                return opt_usage_error(cmd, "unknown option '-%c'", optopt);
            return opt_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
        }
        int rc = handle(c, optarg, user);
        if (rc != CLI_OK) return rc;
    }
    if (optind < argc) return opt_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return CLI_OK;
}

int opt_i64(const char *cmd, const char *opt, const char *arg, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (end == arg || *end != '\0' || errno == ERANGE)
        return opt_usage_error(cmd, "--%s '%s' is not an integer", opt, arg);
    if (v < lo || v > hi)
        return opt_usage_error(cmd, "--%s %lld must be in [%lld, %lld]", opt, v, (long long)lo,
                               (long long)hi);
    *out = (int64_t)v;
    return CLI_OK;
}

int opt_double(const char *cmd, const char *opt, const char *arg, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno == ERANGE || !isfinite(v))
        return opt_usage_error(cmd, "--%s '%s' is not a number", opt, arg);
    if (v < lo || v > hi) return opt_usage_error(cmd, "--%s %g must be in [%g, %g]", opt, v, lo, hi);
    *out = v;
    return CLI_OK;
}

int opt_choice(const char *cmd, const char *opt, const char *arg, const char *const *names, int n,
               int *out) {
    for (int i = 0; i < n; i++)
        if (strcmp(arg, names[i]) == 0) {
            *out = i;
            return CLI_OK;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
    }
    return opt_usage_error(cmd, "--%s '%s' is not one of: %s", opt, arg, list);
}

const tool_recipe_t *tool_recipe_find(const char *name) {
    for (int i = 0; i < TOOL_MAX_RECIPES; i++)
        if (strcmp(recipes[i].name, name) == 0) return &recipes[i];
    return NULL;
}

int opt_recipes(const char *cmd, const char *arg, const tool_recipe_t **out, int *count) {
    char buf[256];
    if (strlen(arg) >= sizeof buf) return opt_usage_error(cmd, "--recipes list is too long");
    strcpy(buf, arg);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const tool_recipe_t *r = tool_recipe_find(tok);
        if (!r)
            return opt_usage_error(cmd,
                                   "--recipes: unknown recipe '%s' (known: fp32, bf16, fp8-delayed, "
                                   "fp8-current, mxfp8, fp8-block)",
                                   tok);
        for (int i = 0; i < n; i++)
            if (out[i] == r) return opt_usage_error(cmd, "--recipes: '%s' is listed twice", tok);
        out[n++] = r;
    }
    if (n == 0) return opt_usage_error(cmd, "--recipes needs at least one recipe");
    *count = n;
    return CLI_OK;
}
