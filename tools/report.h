/* Output of the commands: aligned text tables, a progress bar, the loss CSV and the gnuplot
 * loss-curve PNG.  Everything here prints; callers print only on rank 0. */
#ifndef GLN_TOOLS_REPORT_H
#define GLN_TOOLS_REPORT_H

#include <stdint.h>
#include <stdio.h>

/* A text table: column headers, then rows of cells (strings), printed with aligned columns
 * (first column left-aligned, the others right-aligned). */
enum { REPORT_MAX_COLS = 12, REPORT_CELL = 32 };
typedef struct report_table {
    int cols, rows, cap;
    char head[REPORT_MAX_COLS][REPORT_CELL];
    char (*cells)[REPORT_MAX_COLS][REPORT_CELL];
} report_table_t;
int report_table_init(report_table_t *t, int cols, const char *const *headers);
/* Append a row; cells formatted by the caller (NULL cell = empty). */
int report_table_row(report_table_t *t, const char *const *cells);
void report_table_print(const report_table_t *t, FILE *out);
void report_table_free(report_table_t *t);

/* "\r<label> [#####.....]  done/total  <extra>" on `out` (a terminal); report_progress_end
 * clears the line. */
void report_progress(FILE *out, const char *label, int64_t done, int64_t total, const char *extra);
void report_progress_end(FILE *out);

/* loss.csv: header "step,<name>,..." then one line per step (%.9g). losses[r][s]. */
int report_write_loss_csv(const char *path, int nrec, const char *const *names, int64_t steps,
                          double *const *losses);
/* Per-step losses at full precision, one recipe per block: "<name> <step> <%a> <%.17g>". */
int report_write_loss_dump(const char *path, int nrec, const char *const *names, int64_t steps,
                           double *const *losses);
/* Plot loss.csv into png_path with gnuplot (log-scale loss against step; the title says
 * "MoE MLP loss (<title>)", the y axis `ylabel`).  Returns 0 when the
 * PNG was written, 1 when gnuplot is not installed (a note is printed to `note` unless NULL), -1 when
 * gnuplot failed. */
int report_plot_losses(const char *dir, const char *csv_path, const char *png_path, const char *title,
                       const char *ylabel, int nrec, const char *const *names, FILE *note);

#endif
