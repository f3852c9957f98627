/* `grouplin train --task lm` (the default task): the byte-level language model (lm_model.c) on
 * the text of lm_data.c -- per recipe, training steps on random windows, then the validation
 * loss over every validation window -- and the results table in nats and bits per byte.
 *
 * On the CPU each step's windows are cut on the host and the per-token losses gathered over the
 * ranks.  On CUDA the whole step stays on the device: the text is uploaded once, a device clock
 * (train_ops.h) numbers the steps, the windows are cut by a kernel from it, each step's loss sum
 * goes into a device array, and the host reads that array only every --sync-every steps (the
 * progress line) and at the end -- no other host wait inside a step, so with --graph (one rank)
 * one step is captured in a CUDA graph and replayed for the rest.  Several ranks (--comm mpi)
 * split the work as the host path does: rank r's windows are the global batch's [r·T, (r+1)·T),
 * and its per-token losses are gathered over the device communicator and summed in global token
 * order, so a step's loss sum has the bits one rank would give for the same per-token losses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lm_data.h"
#include "lm_model.h"
#include "report.h"
#include "train.h"
#include "train_ops.h"

typedef struct lm_task {
    lm_text_t text;
    uint8_t *ctx_bytes, *next;        /* [T, context], [T] */
    double val_loss[TOOL_MAX_RECIPES];
} lm_task_t;

static const char *const CMD = "train";

/* The text, read by every rank (each says what is wrong with it, should one fail alone). */
static int lm_load(train_run_t *tr) {
    lm_task_t *k = tr->task = tool_alloc(1, sizeof(lm_task_t), "the language-model task");
    if (!k) {
        tool_error(CMD, "%s", tool_last_error());
        return CLI_FAIL;
    }
    return lm_text_load(tr->o->data, tr->o->context, &k->text);
}

static int lm_alloc(train_run_t *tr) {
    lm_task_t *k = tr->task;
    return (k->ctx_bytes = tool_alloc((size_t)(tr->T * tr->o->context), 1, "the context bytes")) &&
           (k->next = tool_alloc((size_t)tr->T, 1, "the target bytes"));
}

static void lm_teardown(train_run_t *tr) {
    lm_task_t *k = tr->task;
    if (!k) return;
    free(k->ctx_bytes);
    free(k->next);
    lm_text_free(&k->text);
    free(k);
    tr->task = NULL;
}

/* One optimizer step over its microbatches; *loss = the global mean cross-entropy of all their
 * tokens (nats).  Microbatch j holds the step's windows [j·tokens, (j+1)·tokens), so M
 * microbatches see the windows of one batch of M·tokens. */
static gln_status_t lm_step(train_run_t *tr, lm_model_t *m, int64_t s, double *loss) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    const int64_t Ts = train_step_tokens(o);
    double sum = 0;
    gln_status_t st = GLN_STATUS_SUCCESS;
    for (int64_t j = 0; st == GLN_STATUS_SUCCESS && j < o->microbatches; j++) {
        lm_train_windows(&k->text, o->context, (uint64_t)o->seed, s, j * o->tokens + tr->l->rank * tr->T, tr->T,
                         k->ctx_bytes, k->next);
        st = lm_model_forward(m, k->ctx_bytes, k->next, tr->tok_loss, j);
        if (st == GLN_STATUS_SUCCESS) st = train_gather_loss_sum(tr, o->tokens, &sum);
        if (st == GLN_STATUS_SUCCESS) st = lm_model_backward(m, (float)(1.0 / (double)Ts));
    }
    *loss = sum / (double)Ts;
    if (st == GLN_STATUS_SUCCESS) st = lm_model_step(m);
    return st;
}

/* The mean cross-entropy over every validation window, in batches of --tokens (the last one
 * padded; the padding is not counted). */
static gln_status_t lm_validate(train_run_t *tr, lm_model_t *m, double *loss) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    const int64_t n = lm_val_count(&k->text, o->context);
    double total = 0;
    for (int64_t first = 0; first < n; first += o->tokens) {
        lm_val_windows(&k->text, o->context, first + tr->l->rank * tr->T, tr->T, k->ctx_bytes, k->next);
        gln_status_t st = lm_model_forward(m, k->ctx_bytes, k->next, tr->tok_loss, 0);
        double sum = 0;
        const int64_t count = n - first < o->tokens ? n - first : o->tokens;
        if (st == GLN_STATUS_SUCCESS) st = train_gather_loss_sum(tr, count, &sum);
        if (st != GLN_STATUS_SUCCESS) return st;
        total += sum;
    }
    *loss = total / (double)n;
    return GLN_STATUS_SUCCESS;
}

/* ---- the device run (CUDA, any number of ranks) ---------------------------------------- */

typedef struct dev_run {
    uint8_t *text, *bytes, *next; /* [size], [T, C], [T] */
    double *tok_loss, *sums;      /* [T], [max(steps, validation batches)] */
    double *all_loss;             /* several ranks: [T·R], every rank's tok_loss; else tok_loss */
    top_clock_t *clock;
    gln_comm_t *comm;             /* the expert group's (it gathers the losses too) */
} dev_run_t;

static void dev_free(gln_context_t *ctx, dev_run_t *d) {
    void *bufs[] = {d->text, d->bytes, d->next, d->tok_loss, d->sums, d->clock,
                    d->all_loss != d->tok_loss ? d->all_loss : NULL};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) gln_free(ctx, bufs[i]);
    memset(d, 0, sizeof *d);
}

static gln_status_t dev_alloc(train_run_t *tr, dev_run_t *d) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    gln_context_t *ctx = tr->ctx;
    const int64_t nval = (lm_val_count(&k->text, o->context) + o->tokens - 1) / o->tokens;
    const int64_t nsum = o->steps > nval ? o->steps : nval;
    struct {
        void **p;
        size_t bytes;
    } bufs[] = {
        {(void **)&d->text, (size_t)k->text.size},   {(void **)&d->bytes, (size_t)(tr->T * o->context)},
        {(void **)&d->next, (size_t)tr->T},           {(void **)&d->tok_loss, (size_t)tr->T * sizeof(double)},
        {(void **)&d->sums, (size_t)nsum * sizeof(double)}, {(void **)&d->clock, sizeof(top_clock_t)},
        {(void **)&d->all_loss, tr->l->size > 1 ? (size_t)o->tokens * sizeof(double) : 0},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i].bytes) continue;
        gln_status_t st = gln_malloc(ctx, bufs[i].bytes, bufs[i].p);
        if (st != GLN_STATUS_SUCCESS) return st;
    }
    if (!d->all_loss) d->all_loss = d->tok_loss;
    gln_status_t st = gln_memcpy(ctx, d->text, k->text.bytes, (size_t)k->text.size, GLN_COPY_HOST_TO_BACKEND);
    return st == GLN_STATUS_SUCCESS ? top_clock_reset(ctx, d->clock) : st;
}

/* One optimizer step -- its microbatches (as lm_step's), then Adam -- all of it enqueued on the
 * context's stream (on several ranks the MPI collectives synchronize it).  The microbatch index
 * is a host constant of each call, so a captured step holds all M microbatches. */
static gln_status_t dev_step(train_run_t *tr, lm_model_t *m, const dev_run_t *d) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    gln_context_t *ctx = tr->ctx;
    const int64_t Ts = train_step_tokens(o);
    gln_status_t st = top_clock_tick(ctx, d->clock);
    for (int64_t j = 0; st == GLN_STATUS_SUCCESS && j < o->microbatches; j++) {
        st = top_train_windows(ctx, d->text, k->text.train, o->context, (uint64_t)o->seed, d->clock,
                               j * o->tokens + tr->l->rank * tr->T, tr->T, d->bytes, d->next);
        if (st == GLN_STATUS_SUCCESS) st = lm_model_forward(m, d->bytes, d->next, d->tok_loss, j);
        if (st == GLN_STATUS_SUCCESS) st = train_device_gather_loss(tr, d->comm, d->tok_loss, d->all_loss);
        if (st == GLN_STATUS_SUCCESS) st = top_loss_sum(ctx, d->all_loss, o->tokens, d->clock, j > 0, d->sums);
        if (st == GLN_STATUS_SUCCESS) st = lm_model_backward(m, (float)(1.0 / (double)Ts));
    }
    if (st == GLN_STATUS_SUCCESS) st = lm_model_step(m);
    return st;
}

/* losses[0, n) = the step sums so far / the step's tokens (waits for the device). */
static gln_status_t dev_read_losses(train_run_t *tr, const dev_run_t *d, int64_t n, double *losses) {
    gln_status_t st = gln_memcpy(tr->ctx, losses, d->sums, (size_t)n * sizeof(double), GLN_COPY_BACKEND_TO_HOST);
    const double Ts = (double)train_step_tokens(tr->o);
    for (int64_t s = 0; st == GLN_STATUS_SUCCESS && s < n; s++) losses[s] /= Ts;
    return st;
}

/* Training steps; the first one runs eagerly (and, with --graph, one step is then captured and
 * every later step replays it).  *busy: wall time of steps 1 .. steps-1 (the first one warms up
 * the library's caches and pools; the capture is not timed either), scaled to all steps. */
static gln_status_t dev_train(train_run_t *tr, lm_model_t *m, const dev_run_t *d, const char *name,
                              double *losses, double *busy) {
    const train_opts_t *o = tr->o;
    top_graph_t *graph = NULL;
    gln_status_t st = dev_step(tr, m, d);
    if (st == GLN_STATUS_SUCCESS && o->graph && o->steps > 1) { /* captured, not run: before the clock */
        st = top_graph_begin(tr->ctx);
        gln_status_t run = st == GLN_STATUS_SUCCESS ? dev_step(tr, m, d) : st;
        if (st == GLN_STATUS_SUCCESS) st = top_graph_end(tr->ctx, &graph);
        if (run != GLN_STATUS_SUCCESS) st = run;
    }
    if (st == GLN_STATUS_SUCCESS) st = gln_synchronize(tr->ctx);
    const double t0 = train_now_s();
    for (int64_t s = 1; st == GLN_STATUS_SUCCESS && s < o->steps; s++) {
        st = graph ? top_graph_launch(tr->ctx, graph) : dev_step(tr, m, d);
        const int show = tr->show_progress && ((s + 1) % o->sync_every == 0 || s + 1 == o->steps);
        if (st == GLN_STATUS_SUCCESS && show) {
            st = dev_read_losses(tr, d, s + 1, losses);
            train_progress_loss(name, s + 1, o->steps, losses[s]);
        }
    }
    if (st == GLN_STATUS_SUCCESS) st = gln_synchronize(tr->ctx);
    const double t1 = train_now_s();
    if (st == GLN_STATUS_SUCCESS) st = gln_context_async_error(tr->ctx);
    if (st == GLN_STATUS_SUCCESS) st = dev_read_losses(tr, d, o->steps, losses);
    if (tr->show_progress) report_progress_end(stderr);
    top_graph_destroy(graph);
    *busy = o->steps > 1 ? (t1 - t0) * (double)o->steps / (double)(o->steps - 1) : t1 - t0;
    return st;
}

/* The validation loss on the device: one loss sum per batch (the padded tail not counted), read
 * once at the end and added up in batch order. */
static gln_status_t dev_validate(train_run_t *tr, lm_model_t *m, const dev_run_t *d, double *loss) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    const int64_t n = lm_val_count(&k->text, o->context), nb = (n + o->tokens - 1) / o->tokens;
    gln_status_t st = GLN_STATUS_SUCCESS;
    for (int64_t b = 0; st == GLN_STATUS_SUCCESS && b < nb; b++) {
        const int64_t first = b * o->tokens, count = n - first < o->tokens ? n - first : o->tokens;
        st = top_val_windows(tr->ctx, d->text, k->text.size, k->text.train, o->context, first + tr->l->rank * tr->T,
                             tr->T, d->bytes, d->next);
        if (st == GLN_STATUS_SUCCESS) st = lm_model_forward(m, d->bytes, d->next, d->tok_loss, 0);
        if (st == GLN_STATUS_SUCCESS) st = train_device_gather_loss(tr, d->comm, d->tok_loss, d->all_loss);
        if (st == GLN_STATUS_SUCCESS) st = top_loss_sum(tr->ctx, d->all_loss, count, NULL, 0, d->sums + b);
    }
    double *sums = st == GLN_STATUS_SUCCESS ? tool_alloc((size_t)nb, sizeof(double), "the validation sums") : NULL;
    if (st == GLN_STATUS_SUCCESS && !sums) st = GLN_STATUS_OUT_OF_MEMORY;
    if (st == GLN_STATUS_SUCCESS)
        st = gln_memcpy(tr->ctx, sums, d->sums, (size_t)nb * sizeof(double), GLN_COPY_BACKEND_TO_HOST);
    double total = 0;
    for (int64_t b = 0; st == GLN_STATUS_SUCCESS && b < nb; b++) total += sums[b];
    free(sums);
    *loss = total / (double)n;
    return st;
}

static gln_status_t lm_recipe_device(train_run_t *tr, int r, double *losses, double *seconds) {
    lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    dev_run_t d;
    memset(&d, 0, sizeof d);
    lm_model_t *m = NULL;
    gln_comm_t *comm = NULL;
    gln_status_t st = train_device_comm_create(tr, &comm);
    d.comm = comm;
    if (st == GLN_STATUS_SUCCESS) st = dev_alloc(tr, &d);
    moe_model_config_t mc = train_model_config(o, o->recipes[r], tr->T);
    mc.clock = d.clock;
    if (st == GLN_STATUS_SUCCESS) st = lm_model_create(tr->ctx, comm, &mc, o->context, &m);
    double busy = 0;
    if (st == GLN_STATUS_SUCCESS) st = dev_train(tr, m, &d, o->recipes[r]->name, losses, &busy);
    if (st == GLN_STATUS_SUCCESS) st = dev_validate(tr, m, &d, &k->val_loss[r]);
    lm_model_destroy(m);
    dev_free(tr->ctx, &d);
    gln_comm_destroy(comm);
    return train_max_seconds(tr, st, busy, seconds);
}

/* ---- the host run (CPU, any number of ranks) ------------------------------------------------ */

static gln_status_t lm_recipe(train_run_t *tr, int r, double *losses, double *seconds) {
    lm_task_t *k = tr->task;
    if (top_on_device(tr->ctx)) return lm_recipe_device(tr, r, losses, seconds);
    const train_opts_t *o = tr->o;
    const tool_recipe_t *rec = o->recipes[r];
    moe_model_config_t mc = train_model_config(o, rec, tr->T);
    lm_model_t *m = NULL;
    gln_status_t st = lm_model_create(tr->ctx, tr->l->comm, &mc, o->context, &m);
    double busy = 0;
    for (int64_t s = 0; st == GLN_STATUS_SUCCESS && s < o->steps; s++) {
        const double t0 = train_now_s();
        st = lm_step(tr, m, s, &losses[s]);
        busy += train_now_s() - t0;
        if (tr->show_progress) train_progress_loss(rec->name, s + 1, o->steps, losses[s]);
    }
    if (tr->show_progress) report_progress_end(stderr);
    if (st == GLN_STATUS_SUCCESS) st = lm_validate(tr, m, &k->val_loss[r]);
    lm_model_destroy(m);
    return train_max_seconds(tr, st, busy, seconds);
}

#define LN2 0.69314718055994530942 /* nats per bit */

static void header(const train_run_t *tr) {
    const lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    char files[32] = "", model[256];
    train_model_desc(o, model, sizeof model);
    if (!o->data) snprintf(files, sizeof files, " in %d files", k->text.files);
    printf("grouplin train: byte-level LM on %s (%lld bytes%s: %lld train, %lld validation), "
           "context %lld\n"
           "%s, %lld steps, %d rank%s, "
           "%s backend, %s path%s%s%s\n\n",
           o->data ? o->data : LM_DEFAULT_CORPUS, (long long)k->text.size,
           files,
           (long long)k->text.train, (long long)(k->text.size - k->text.train), (long long)o->context,
           model, (long long)o->steps, tr->l->size,
           tr->l->size == 1 ? "" : "s", o->backend ? "cuda" : "cpu", o->path == 0 ? "split" : "grouped",
           o->graph ? ", step captured in a CUDA graph" : "",
           o->backend ? ", expert weights sharded over " : "", o->backend ? train_device_comm_name(tr) : "");
}

static void lm_print(const train_run_t *tr, double *const *losses, const double *secs) {
    const lm_task_t *k = tr->task;
    const train_opts_t *o = tr->o;
    const moe_shape_t shape = train_shape(o);
    const int64_t Ts = train_step_tokens(o);
    const double flops = moe_expert_flops(&shape, Ts * o->topk);
    const int bf16 = train_find_bf16(o);
    static const char *const head[] = {"recipe", "train nats", "train bits/B", "val nats", "val bits/B",
                                       "vs bf16", "steps/s", "tokens/s", "GFLOP/s"};
    report_table_t t;
    report_table_init(&t, 9, head);
    for (int r = 0; r < o->nrec; r++) {
        char c[9][REPORT_CELL];
        const double train = train_final_loss(losses[r], o->steps), val = k->val_loss[r];
        const double sps = (double)o->steps / secs[r];
        snprintf(c[0], REPORT_CELL, "%s", o->recipes[r]->name);
        train_cell(c[1], "%.4f", train);
        train_cell(c[2], "%.4f", train / LN2);
        train_cell(c[3], "%.4f", val);
        train_cell(c[4], "%.4f", val / LN2);
        if (bf16 >= 0 && r != bf16) train_cell(c[5], "%.4f", val / k->val_loss[bf16]);
        else snprintf(c[5], REPORT_CELL, "-");
        train_cell(c[6], "%.1f", sps);
        train_cell(c[7], "%.0f", sps * (double)Ts);
        train_cell(c[8], "%.2f", sps * flops * 1e-9);
        const char *cells[9] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]};
        report_table_row(&t, cells);
    }
    header(tr);
    report_table_print(&t, stdout);
    report_table_free(&t);
    printf("\ntrain = mean training loss of the last %d steps; val = loss over all %lld validation\n"
           "windows; nats per byte, bits/B = nats / ln 2 (uniform guessing: 5.5452 nats, 8 bits);\n"
           "vs bf16 = validation loss relative to bf16; GFLOP/s counts the expert GEMMs\n"
           "(fprop + dgrad + wgrad = 6 * rows * H * (FC1 out + F) per step)\n",
           train_final_window(o), (long long)lm_val_count(&k->text, o->context));
}

const train_task_t train_task_lm = {
    "byte-level language model, training loss", "cross-entropy (nats per byte)", lm_load, lm_alloc, NULL,
    lm_recipe, lm_print, lm_teardown,
};
