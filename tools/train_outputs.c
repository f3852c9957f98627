/* The files of `grouplin train` (rank 0): loss.csv and loss.png in --out, the --dump-losses file,
 * and the --expect-loss-drop verdict (see train.h). */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "report.h"
#include "train.h"

static const char *const CMD = "train";

/* The files the run writes into --out itself (loss.gp while gnuplot runs, then removed). */
static const struct {
    const char *name, *what;
} own_files[] = {{"loss.csv", "loss table"}, {"loss.png", "loss plot"}, {"loss.gp", "plot script"}};

/* The absolute name of `path` with its directory resolved (symbolic links, "..", "."), the file
 * itself need not exist; 0 when the directory cannot be resolved. */
static int resolve(const char *path, char *out, size_t cap) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    char real[PATH_MAX];
    if (!realpath(dir, real)) return 0;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) return 0; /* a directory */
    return snprintf(out, cap, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base) < (int)cap;
}

/* 1 when `a` and `b` name the same file: the same resolved name, or (both existing) the same
 * inode, which also catches a hard or symbolic link to it. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return 1;
    char ra[PATH_MAX], rb[PATH_MAX];
    return resolve(a, ra, sizeof ra) && resolve(b, rb, sizeof rb) && strcmp(ra, rb) == 0;
}

/* The dump must not be one of the files the run writes into --out: the later write would
 * replace the earlier one without a word. */
static int check_dump_name(const train_opts_t *o) {
    for (size_t i = 0; i < sizeof own_files / sizeof own_files[0]; i++) {
        char own[4096];
        snprintf(own, sizeof own, "%s/%s", o->out_dir, own_files[i].name);
        if (same_file(o->dump, own)) {
            tool_error(CMD, "--dump-losses '%s' is the %s (%s) that the run writes into --out '%s'; "
                            "name another file", o->dump, own_files[i].what, own_files[i].name, o->out_dir);
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

/* Before any step runs (rank 0): the --out directory exists (created here) and is writable, and
 * the --dump-losses file can be opened for writing and is none of the files written into --out,
 * so a bad path fails at once, not after the whole run.  The probe opens the dump file for
 * appending (its contents stay) and removes it again when it did not exist before. */
int train_prepare_outputs(const train_opts_t *o) {
    struct stat sb;
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        tool_error(CMD, "cannot create --out directory '%s': %s", o->out_dir, strerror(errno));
        return CLI_FAIL;
    }
    if (stat(o->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        tool_error(CMD, "--out '%s' is not a directory", o->out_dir);
        return CLI_FAIL;
    }
    if (access(o->out_dir, W_OK | X_OK) != 0) {
        tool_error(CMD, "cannot write into --out directory '%s': %s", o->out_dir, strerror(errno));
        return CLI_FAIL;
    }
    if (!o->dump) return CLI_OK;
    if (check_dump_name(o) != CLI_OK) return CLI_FAIL;
    const int existed = access(o->dump, F_OK) == 0;
    FILE *f = fopen(o->dump, "a");
    if (!f) {
        tool_error(CMD, "cannot write --dump-losses file '%s': %s", o->dump, strerror(errno));
        return CLI_FAIL;
    }
    fclose(f);
    if (!existed) unlink(o->dump);
    return CLI_OK;
}

/* Remove a partly written output file (a regular file only: never a device such as /dev/full). */
static void remove_partial(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(path);
}

/* loss.csv, --dump-losses, loss.png (rank 0).  When a file cannot be written, neither loss.csv
 * nor the dump is left behind: a caller comparing runs never picks up half of a result. */
int train_write_outputs(const train_opts_t *o, const train_task_t *task, double *const *losses) {
    const char *names[TOOL_MAX_RECIPES];
    for (int r = 0; r < o->nrec; r++) names[r] = o->recipes[r]->name;
    char csv[4096], png[4096];
    snprintf(csv, sizeof csv, "%s/loss.csv", o->out_dir);
    snprintf(png, sizeof png, "%s/loss.png", o->out_dir);
    const char *failed = NULL;
    if (report_write_loss_csv(csv, o->nrec, names, o->steps, losses) != 0)
        failed = csv;
    else if (o->dump && report_write_loss_dump(o->dump, o->nrec, names, o->steps, losses) != 0)
        failed = o->dump;
    if (failed) {
        const int err = errno;
        remove_partial(csv);
        if (o->dump) remove_partial(o->dump);
        tool_error(CMD, "cannot write %s: %s (no loss.csv or dump written)", failed, strerror(err));
        return CLI_FAIL;
    }
    int plotted = o->plot ? report_plot_losses(o->out_dir, csv, png, task->plot_title, task->plot_ylabel, o->nrec,
                                               names, o->quiet ? NULL : stdout)
                          : 1;
    if (!o->quiet) printf("wrote %s%s%s\n", csv, plotted == 0 ? ", " : "", plotted == 0 ? png : "");
    return CLI_OK;
}

/* Exit 1 unless every recipe's loss fell by the factor. */
int train_check_drop(const train_opts_t *o, double *const *losses) {
    if (o->expect_drop <= 0) return CLI_OK;
    int rc = CLI_OK;
    for (int r = 0; r < o->nrec; r++) {
        const double drop = losses[r][0] / train_final_loss(losses[r], o->steps);
        if (!(drop >= o->expect_drop)) {
            tool_error(CMD, "FAIL: %s loss fell by %.3gx, expected >= %.3gx", o->recipes[r]->name, drop,
                       o->expect_drop);
            rc = CLI_FAIL;
        }
    }
    return rc;
}
