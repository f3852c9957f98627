/* `grouplin train --task lm`: one recipe of the byte-level language model (lm_model.c) on the
 * text of lm_data.c -- training steps on random windows, then the validation loss over every
 * validation window -- and the results table in nats and bits per byte. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lm_model.h"
#include "report.h"
#include "train.h"

/* One training step; *loss = the global mean cross-entropy of the batch (nats). */
static gln_status_t lm_step(train_run_t *tr, lm_model_t *m, int64_t s, double *loss) {
    const train_opts_t *o = tr->o;
    lm_train_windows(&tr->text, o->context, (uint64_t)o->seed, s, tr->l->rank * tr->T, tr->T,
                     tr->ctx_bytes, tr->next);
    gln_status_t st = lm_model_forward(m, tr->ctx_bytes, tr->next, tr->tok_loss);
    double sum = 0;
    if (st == GLN_STATUS_SUCCESS) st = train_gather_loss_sum(tr, o->tokens, &sum);
    *loss = sum / (double)o->tokens;
    if (st == GLN_STATUS_SUCCESS) st = lm_model_backward(m, (float)(1.0 / (double)o->tokens));
    if (st == GLN_STATUS_SUCCESS) st = lm_model_step(m);
    return st;
}

/* The mean cross-entropy over every validation window, in batches of --tokens (the last one
 * padded; the padding is not counted). */
static gln_status_t lm_validate(train_run_t *tr, lm_model_t *m, double *loss) {
    const train_opts_t *o = tr->o;
    const int64_t n = lm_val_count(&tr->text, o->context);
    double total = 0;
    for (int64_t first = 0; first < n; first += o->tokens) {
        lm_val_windows(&tr->text, o->context, first + tr->l->rank * tr->T, tr->T, tr->ctx_bytes, tr->next);
        gln_status_t st = lm_model_forward(m, tr->ctx_bytes, tr->next, tr->tok_loss);
        double sum = 0;
        const int64_t count = n - first < o->tokens ? n - first : o->tokens;
        if (st == GLN_STATUS_SUCCESS) st = train_gather_loss_sum(tr, count, &sum);
        if (st != GLN_STATUS_SUCCESS) return st;
        total += sum;
    }
    *loss = total / (double)n;
    return GLN_STATUS_SUCCESS;
}

gln_status_t train_lm_recipe(train_run_t *tr, int r, double *losses, double *seconds) {
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
        if (tr->show_progress) {
            char extra[64];
            snprintf(extra, sizeof extra, "loss %.4g", losses[s]);
            report_progress(stderr, rec->name, s + 1, o->steps, extra);
        }
    }
    if (tr->show_progress) report_progress_end(stderr);
    if (st == GLN_STATUS_SUCCESS) st = lm_validate(tr, m, &tr->val_loss[r]);
    lm_model_destroy(m);
    float mine = (float)busy, most = mine;
    if (st == GLN_STATUS_SUCCESS)
        st = gln_comm_allreduce(tr->l->comm, &mine, &most, 1, GLN_DTYPE_FP32, GLN_REDUCE_MAX);
    *seconds = most;
    return st;
}

#define LN2 0.69314718055994530942 /* nats per bit */

static void fmt(char *buf, const char *f, double v) { snprintf(buf, REPORT_CELL, f, v); }

static void header(const train_run_t *tr) {
    const train_opts_t *o = tr->o;
    char files[32] = "";
    if (!o->data) snprintf(files, sizeof files, " in %d files", tr->text.files);
    printf("grouplin train: byte-level LM on %s (%lld bytes%s: %lld train, %lld validation), "
           "context %lld\n"
           "MoE MLP H=%lld F=%lld E=%lld k=%lld %s, %lld tokens/step, %lld steps, %d rank%s, "
           "cpu backend, %s path\n\n",
           o->data ? o->data : LM_DEFAULT_CORPUS, (long long)tr->text.size,
           files,
           (long long)tr->text.train, (long long)(tr->text.size - tr->text.train), (long long)o->context,
           (long long)o->hidden, (long long)o->ffn, (long long)o->experts, (long long)o->topk,
           o->act == 0 ? "swiglu" : "gelu", (long long)o->tokens, (long long)o->steps, tr->l->size,
           tr->l->size == 1 ? "" : "s", o->path == 0 ? "split" : "grouped");
}

static int find_bf16(const train_opts_t *o) {
    for (int r = 0; r < o->nrec; r++)
        if (strcmp(o->recipes[r]->name, "bf16") == 0) return r;
    return -1;
}

void train_lm_print(const train_run_t *tr, double *const *losses, const double *secs) {
    const train_opts_t *o = tr->o;
    moe_shape_t shape = {o->hidden, o->ffn, (int32_t)o->experts, (int32_t)o->topk,
                         o->act == 0 ? GLN_ACT_SWIGLU : GLN_ACT_GELU};
    const double flops = moe_expert_flops(&shape, o->tokens * o->topk);
    const int bf16 = find_bf16(o);
    static const char *const head[] = {"recipe", "train nats", "train bits/B", "val nats", "val bits/B",
                                       "vs bf16", "steps/s", "tokens/s", "GFLOP/s"};
    report_table_t t;
    report_table_init(&t, 9, head);
    for (int r = 0; r < o->nrec; r++) {
        char c[9][REPORT_CELL];
        const double train = train_final_loss(losses[r], o->steps), val = tr->val_loss[r];
        const double sps = (double)o->steps / secs[r];
        snprintf(c[0], REPORT_CELL, "%s", o->recipes[r]->name);
        fmt(c[1], "%.4f", train);
        fmt(c[2], "%.4f", train / LN2);
        fmt(c[3], "%.4f", val);
        fmt(c[4], "%.4f", val / LN2);
        if (bf16 >= 0 && r != bf16) fmt(c[5], "%.4f", val / tr->val_loss[bf16]);
        else snprintf(c[5], REPORT_CELL, "-");
        fmt(c[6], "%.1f", sps);
        fmt(c[7], "%.0f", sps * (double)o->tokens);
        fmt(c[8], "%.2f", sps * flops * 1e-9);
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
           (int)(o->steps < FINAL_WINDOW ? o->steps : FINAL_WINDOW),
           (long long)lm_val_count(&tr->text, o->context));
}
