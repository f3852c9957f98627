/* `grouplin train`: what its files share.
 *
 *   train.c          the command: parse, start the ranks, run each recipe of the chosen task,
 *                    print, write the outputs (it calls the tasks and the helpers)
 *   train_teacher.c  the task "teacher": imitate a fixed random teacher MoE (mean squared error)
 *   train_lm.c       the task "lm" (the default): a byte-level language model on real text
 *   train_opts.c     the options and the help text
 *   train_common.c   helpers of both tasks: model configuration, clock, loss gathering, the
 *                    device group's communicator, table cells
 *   train_outputs.c  loss.csv, --dump-losses, loss.png, --expect-loss-drop
 *
 * A task file calls only the helpers (never the other task or train.c), so no two files call
 * each other. */
#ifndef GLN_TOOLS_TRAIN_H
#define GLN_TOOLS_TRAIN_H

#include <stdint.h>

#include "launch.h"
#include "moe_model.h"
#include "options.h"

typedef enum train_task_id { TRAIN_TASK_LM = 0, TRAIN_TASK_TEACHER = 1 } train_task_id_t;

/* A named model: the expert dimensions of a real MoE model (one MoE layer of it). */
typedef struct train_preset {
    const char *name, *like;
    int64_t hidden, ffn, experts, topk, tokens;
} train_preset_t;

typedef struct train_opts {
    const tool_recipe_t *recipes[TOOL_MAX_RECIPES];
    int nrec;
    int64_t steps, tokens, hidden, ffn, experts, topk, seed, batches, threads, context;
    int quantized_weights;            /* --quantized-weights: the group's quantized_shard where supported */
    int64_t microbatches;             /* per optimizer step, --tokens each (gradient accumulation) */
    const train_preset_t *preset;     /* --preset, or NULL */
    unsigned given;                   /* the shape options given explicitly (they override the preset) */
    double lr, expect_drop;
    int path, act, backend, exact, plot, quiet, progress, task;
    int path_given, graph;            /* --path was given; --graph (CUDA: replay a captured step) */
    int comm, comm_given;             /* CUDA: the expert group's communicator, 0 NCCL, 1 self, 2 MPI */
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
    void *task;                       /* the task's own state (its load / alloc create it) */
} train_run_t;

/* A task.  The command calls, in order: load (every rank, before the start vote; may be NULL),
 * alloc (host buffers, before the context exists), create (after it; may be NULL), recipe once
 * per recipe, print (rank 0, unless --quiet), teardown (always, also after a failed load). */
typedef struct train_task {
    const char *plot_title, *plot_ylabel;
    /* CLI_OK, or CLI_FAIL with the reason printed (tool_error). */
    int (*load)(train_run_t *tr);
    /* 0 when a buffer cannot be allocated (tool_last_error says which). */
    int (*alloc)(train_run_t *tr);
    gln_status_t (*create)(train_run_t *tr);
    /* losses[s] = the training loss of step s; *seconds = time in the steps (max over ranks). */
    gln_status_t (*recipe)(train_run_t *tr, int r, double *losses, double *seconds);
    void (*print)(const train_run_t *tr, double *const *losses, const double *secs);
    void (*teardown)(train_run_t *tr);
} train_task_t;

extern const train_task_t train_task_lm, train_task_teacher;

/* train_opts.c: the options (defaults filled in); CLI_OK, CLI_USAGE, or CLI_OK with *help_shown. */
int train_parse(int argc, char **argv, train_opts_t *o, int *help_shown);

/* train_common.c */
double train_now_s(void);
moe_model_config_t train_model_config(const train_opts_t *o, const tool_recipe_t *r, int64_t T);
moe_shape_t train_shape(const train_opts_t *o);
/* Mean over the last FINAL_WINDOW steps (fewer for short runs). */
enum { FINAL_WINDOW = 10 };
double train_final_loss(const double *losses, int64_t steps);
int train_final_window(const train_opts_t *o); /* steps in that window */
/* Tokens per optimizer step, all microbatches: --tokens x --microbatches. */
int64_t train_step_tokens(const train_opts_t *o);
/* The banner's model and batch: "MoE MLP H=.. F=.. E=.. k=.. swiglu[ (preset ..)], [M microbatches
 * x T = ]N tokens/step". */
void train_model_desc(const train_opts_t *o, char *buf, size_t size);
/* The index of the bf16 recipe, -1 when it is not run. */
int train_find_bf16(const train_opts_t *o);
/* snprintf(cell, REPORT_CELL, f, v): one table cell. */
void train_cell(char *cell, const char *f, double v);
/* *sum += the per-token losses in tr->tok_loss over every rank, gathered and added in global token
 * order (the first `count` global tokens), so it does not depend on the rank count; the sum
 * continues over the microbatches of a step as over one batch of all their tokens. */
gln_status_t train_gather_loss_sum(train_run_t *tr, int64_t count, double *sum);
/* After a recipe's steps: *seconds = the most `busy` seconds of any rank (a collective, run only
 * when st is GLN_STATUS_SUCCESS; else *seconds = busy).  Returns st or the collective's status. */
gln_status_t train_max_seconds(train_run_t *tr, gln_status_t st, double busy, double *seconds);
/* The progress line of a recipe's run after step `done` of `total`, showing its loss. */
void train_progress_loss(const char *name, int64_t done, int64_t total, double loss);
/* CUDA: whether the expert weights' group communicates over NCCL (else MPI on device memory with
 * --comm mpi on several ranks, else the self communicator), its name for the banner, and that
 * communicator, bound to tr->ctx (collective over the ranks). */
int train_device_comm_nccl(const train_opts_t *o);
const char *train_device_comm_name(const train_run_t *tr);
gln_status_t train_device_comm_create(const train_run_t *tr, gln_comm_t **comm);
/* CUDA, several ranks: all_loss [T·R] (device) = every rank's tok_loss [T] (device) in rank order,
 * gathered over `comm` (doubles moved as bytes), so that the loss is summed in global token order
 * as on the host; one rank: nothing (the caller sums tok_loss itself). */
gln_status_t train_device_gather_loss(const train_run_t *tr, gln_comm_t *comm, const double *tok_loss,
                                      double *all_loss);

/* train_outputs.c (rank 0) */
int train_prepare_outputs(const train_opts_t *o);
int train_write_outputs(const train_opts_t *o, const train_task_t *task, double *const *losses);
int train_check_drop(const train_opts_t *o, double *const *losses);

#endif
