/* Tables, progress bar, CSV / dump files and the gnuplot call (see report.h). */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int report_table_init(report_table_t *t, int cols, const char *const *headers) {
    memset(t, 0, sizeof *t);
    if (cols < 1 || cols > REPORT_MAX_COLS) return -1;
    t->cols = cols;
    for (int c = 0; c < cols; c++) snprintf(t->head[c], REPORT_CELL, "%s", headers[c]);
    return 0;
}

int report_table_row(report_table_t *t, const char *const *cells) {
    if (t->rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 8;
        void *p = realloc(t->cells, (size_t)cap * sizeof *t->cells);
        if (!p) return -1;
        t->cells = p;
        t->cap = cap;
    }
    for (int c = 0; c < t->cols; c++)
        snprintf(t->cells[t->rows][c], REPORT_CELL, "%s", cells[c] ? cells[c] : "");
    t->rows++;
    return 0;
}

void report_table_print(const report_table_t *t, FILE *out) {
    int w[REPORT_MAX_COLS];
    for (int c = 0; c < t->cols; c++) {
        w[c] = (int)strlen(t->head[c]);
        for (int r = 0; r < t->rows; r++) {
            int l = (int)strlen(t->cells[r][c]);
            if (l > w[c]) w[c] = l;
        }
    }
    for (int r = -1; r < t->rows; r++) {
        for (int c = 0; c < t->cols; c++) {
            const char *s = r < 0 ? t->head[c] : t->cells[r][c];
            fprintf(out, c == 0 ? "%-*s" : "  %*s", w[c], s);
        }
        fputc('\n', out);
        if (r < 0) {
            int total = 0;
            for (int c = 0; c < t->cols; c++) total += w[c] + (c ? 2 : 0);
            for (int i = 0; i < total; i++) fputc('-', out);
            fputc('\n', out);
        }
    }
}

void report_table_free(report_table_t *t) {
    free(t->cells);
    t->cells = NULL;
    t->rows = t->cap = 0;
}

void report_progress(FILE *out, const char *label, int64_t done, int64_t total, const char *extra) {
    enum { WIDTH = 30 };
    int fill = total > 0 ? (int)(WIDTH * done / total) : WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(out, "\r%-12s [%s] %5lld/%-5lld %s\033[K", label, bar, (long long)done, (long long)total,
            extra ? extra : "");
    fflush(out);
}

void report_progress_end(FILE *out) {
    fputs("\r\033[K", out);
    fflush(out);
}

int report_write_loss_csv(const char *path, int nrec, const char *const *names, int64_t steps,
                          double *const *losses) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("step", f);
    for (int r = 0; r < nrec; r++) fprintf(f, ",%s", names[r]);
    fputc('\n', f);
    for (int64_t s = 0; s < steps; s++) {
        fprintf(f, "%lld", (long long)s);
        for (int r = 0; r < nrec; r++) fprintf(f, ",%.9g", losses[r][s]);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int report_write_loss_dump(const char *path, int nrec, const char *const *names, int64_t steps,
                           double *const *losses) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int r = 0; r < nrec; r++)
        for (int64_t s = 0; s < steps; s++)
            fprintf(f, "%s %lld %a %.17g\n", names[r], (long long)s, losses[r][s], losses[r][s]);
    return fclose(f) == 0 ? 0 : -1;
}

/* 1 when an executable `name` is on PATH. */
static int on_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dir[4096];
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n + strlen(name) + 2 < sizeof dir) {
            memcpy(dir, path, n);
            dir[n] = '/';
            strcpy(dir + n + 1, name);
            if (access(dir, X_OK) == 0) return 1;
        }
        path += n;
        if (*path == ':') path++;
    }
    return 0;
}

/* gnuplot script for `terminal`; returns gnuplot's exit status (or -1). */
static int run_gnuplot(const char *script_path, const char *terminal, const char *csv_path,
                       const char *png_path, const char *title, const char *ylabel, int nrec,
                       const char *const *names) {
    FILE *f = fopen(script_path, "w");
    if (!f) return -1;
    fprintf(f,
            "set terminal %s size 960,600\n"
            "set output '%s'\n"
            "set datafile separator ','\n"
            "set title 'grouplin train: MoE MLP loss (%s)'\n"
            "set xlabel 'step'\nset ylabel '%s'\nset logscale y\nset grid\n"
            "set key top right\nplot ",
            terminal, png_path, title, ylabel);
    for (int r = 0; r < nrec; r++)
        fprintf(f, "%s'%s' using 1:%d with lines lw 2 title '%s'", r ? ", " : "", csv_path, r + 2,
                names[r]);
    fputc('\n', f);
    if (fclose(f) != 0) return -1;
    pid_t pid;
    char *argv[] = {"gnuplot", (char *)script_path, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    /* gnuplot's complaints about a missing terminal are ours to report, not the user's. */
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int report_plot_losses(const char *dir, const char *csv_path, const char *png_path, const char *title,
                       const char *ylabel, int nrec, const char *const *names, FILE *note) {
    if (!on_path("gnuplot")) {
        if (note)
            fprintf(note, "note: gnuplot is not installed, so %s was not drawn "
                      "(apt-get install gnuplot-nox); the data is in %s\n", png_path, csv_path);
        return 1;
    }
    char script[4096];
    snprintf(script, sizeof script, "%s/loss.gp", dir);
    /* pngcairo draws nicer curves; the plain png terminal is the fallback.  The script is
     * removed afterwards so the output directory holds only loss.csv and loss.png. */
    int ok = run_gnuplot(script, "pngcairo", csv_path, png_path, title, ylabel, nrec, names) == 0 ||
             run_gnuplot(script, "png", csv_path, png_path, title, ylabel, nrec, names) == 0;
    unlink(script);
    if (ok) return 0;
    if (note)
        fprintf(note, "note: gnuplot could not draw %s (no png or pngcairo terminal?); the data is in %s\n",
            png_path, csv_path);
    return -1;
}
