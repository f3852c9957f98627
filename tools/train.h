/* `grouplin train` internals shared by train.c (options, the teacher task, outputs, the entry
 * point) and train_lm.c (the byte-level language-model task). */
#ifndef GLN_TOOLS_TRAIN_H
#define GLN_TOOLS_TRAIN_H

#include <stdint.h>

#include "launch.h"
#include "lm_data.h"
#include "moe_model.h"
#include "options.h"

typedef enum train_task { TRAIN_TASK_LM = 0, TRAIN_TASK_TEACHER = 1 } train_task_t;

typedef struct train_opts {
    const tool_recipe_t *recipes[TOOL_MAX_RECIPES];
    int nrec;
    int64_t steps, tokens, hidden, ffn, experts, topk, seed, batches, threads, context;
    double lr, expect_drop;
    int path, act, backend, exact, plot, quiet, progress, task;
    int path_given, graph;            /* --path was given; --graph (CUDA: replay a captured step) */
    int comm, comm_given;             /* CUDA: the expert group's communicator, 0 NCCL, 1 self */
    int64_t sync_every;               /* CUDA: read the losses every N steps (the progress line) */
    int teacher_only, lm_only;        /* an option of one task was given (usage check) */
    const char *out_dir, *dump, *data;
} train_opts_t;

/* Everything one training run needs besides the student. */
typedef struct train_run {
    const train_opts_t *o;
    tool_launch_t *l;
    gln_context_t *ctx;
    int64_t T;                        /* tokens on this rank */
    double *tok_loss, *all_loss;      /* [T], [T·R] per-token losses */
    int show_progress;
    /* --task teacher */
    moe_model_t *teacher;
    float *x, *target, *y, *dy;       /* [T, H] */
    /* --task lm */
    lm_text_t text;
    uint8_t *ctx_bytes, *next;        /* [T, context], [T] */
    double val_loss[TOOL_MAX_RECIPES];
} train_run_t;

double train_now_s(void);
moe_model_config_t train_model_config(const train_opts_t *o, const tool_recipe_t *r, int64_t T);
/* Mean over the last FINAL_WINDOW steps (fewer for short runs). */
enum { FINAL_WINDOW = 10 };
double train_final_loss(const double *losses, int64_t steps);
/* The sum of the per-token losses in tr->tok_loss over every rank, gathered and summed in global token
 * order (the first `count` global tokens), so it does not depend on the rank count. */
gln_status_t train_gather_loss_sum(train_run_t *tr, int64_t count, double *sum);

/* train_lm.c: one recipe of the language-model task (losses[s] = training loss of step s,
 * tr->val_loss[r] = validation loss); the results table. */
gln_status_t train_lm_recipe(train_run_t *tr, int r, double *losses, double *seconds);
void train_lm_print(const train_run_t *tr, double *const *losses, const double *secs);

#endif
