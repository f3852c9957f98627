/* `grouplin train`: train the MoE MLP of moe_model.c once per recipe on a task -- a byte-level
 * language model on real text (train_lm.c; the default) or imitating a synthetic teacher MoE
 * (train_teacher.c) -- report losses, speed and FP8-vs-bf16 quality, write loss.csv / loss.png.
 * This file runs the command; train.h lists the others. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "train.h"

static const char *const CMD = "train";

/* Every recipe, then (rank 0) the table and the files. */
static int run(train_run_t *tr, const train_task_t *task, double **losses, double *secs) {
    const train_opts_t *o = tr->o;
    for (int r = 0; r < o->nrec; r++) {
        gln_status_t st = task->recipe(tr, r, losses[r], &secs[r]);
        if (st != GLN_STATUS_SUCCESS) {
            tool_error(CMD, "recipe %s: %s: %s", o->recipes[r]->name, gln_status_string(st), tool_last_error());
            return CLI_FAIL;
        }
    }
    if (tr->l->rank != 0) return CLI_OK;
    if (!o->quiet) task->print(tr, losses, secs);
    int rc = train_write_outputs(o, task, losses);
    int drop = train_check_drop(o, losses);
    return rc != CLI_OK ? rc : drop;
}

/* The buffers of every task and of `task`; 0 when one cannot be allocated (tool_last_error says
 * which). */
static int alloc_buffers(train_run_t *tr, const train_task_t *task, double **losses) {
    const train_opts_t *o = tr->o;
    int ok = (tr->tok_loss = tool_alloc((size_t)tr->T, sizeof(double), "the per-token losses")) &&
             (tr->all_loss = tool_alloc((size_t)o->tokens, sizeof(double), "the gathered losses")) &&
             task->alloc(tr);
    for (int r = 0; r < o->nrec; r++)
        ok = ok && (losses[r] = tool_alloc((size_t)o->steps, sizeof(double), "the loss history"));
    return ok;
}

/* Set up, train every recipe, clean up: the exit status. */
static int train_with(train_run_t *tr, const train_task_t *task) {
    const train_opts_t *o = tr->o;
    tool_launch_t *l = tr->l;
    double *losses[TOOL_MAX_RECIPES] = {0}, secs[TOOL_MAX_RECIPES] = {0};
    /* Output paths first (rank 0 writes them; every rank stops when they are unusable). */
    int rc = l->rank == 0 ? train_prepare_outputs(o) : CLI_OK;
    /* The task's inputs next (the text: every rank reads it). */
    if (rc == CLI_OK && task->load) rc = task->load(tr);
    if (tool_launch_any(l, rc != CLI_OK)) {
        task->teardown(tr);
        return CLI_FAIL;
    }
    const int ok = alloc_buffers(tr, task, losses);
    gln_context_options_t co = GLN_CONTEXT_OPTIONS_INIT;
    co.num_threads = (int)o->threads;
    co.backend = o->backend == 1 ? GLN_BACKEND_CUDA : GLN_BACKEND_CPU;
    gln_status_t st = ok ? gln_context_create(&co, &tr->ctx) : GLN_STATUS_OUT_OF_MEMORY;
    if (st == GLN_STATUS_SUCCESS && task->create) st = task->create(tr);
    if (st != GLN_STATUS_SUCCESS) {
        tool_error(CMD, "setup failed: %s: %s", gln_status_string(st), tool_last_error());
        rc = CLI_FAIL;
    } else {
        rc = run(tr, task, losses, secs);
    }
    rc = tool_launch_any(l, rc != CLI_OK) ? (rc != CLI_OK ? rc : CLI_FAIL) : CLI_OK;
    task->teardown(tr);
    gln_context_destroy(tr->ctx);
    for (int r = 0; r < o->nrec; r++) free(losses[r]);
    free(tr->tok_loss);
    free(tr->all_loss);
    return rc;
}

int cmd_train(int argc, char **argv) {
    train_opts_t o;
    int help_shown = 0;
    int rc = train_parse(argc, argv, &o, &help_shown);
    if (rc != CLI_OK || help_shown) return rc;

    tool_launch_t l;
    if (tool_launch_init(&argc, &argv, &l) != CLI_OK) return CLI_FAIL;
    train_run_t tr;
    memset(&tr, 0, sizeof tr);
    tr.o = &o;
    tr.l = &l;
    tr.T = o.tokens / l.size;
    tr.show_progress = l.rank == 0 && !o.quiet && (o.progress || isatty(2));
    rc = train_with(&tr, o.task == TRAIN_TASK_LM ? &train_task_lm : &train_task_teacher);
    tool_launch_fini(&l);
    return rc;
}
