/* Helpers of both `grouplin train` tasks (see train.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "train.h"

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

moe_shape_t train_shape(const train_opts_t *o) {
    moe_shape_t shape = {o->hidden, o->ffn, (int32_t)o->experts, (int32_t)o->topk,
                         o->act == 0 ? GLN_ACT_SWIGLU : GLN_ACT_GELU};
    return shape;
}

moe_model_config_t train_model_config(const train_opts_t *o, const tool_recipe_t *r, int64_t T) {
    moe_model_config_t c;
    memset(&c, 0, sizeof c);
    c.shape = train_shape(o);
    c.recipe = r;
    c.path = o->path == 0 ? GLN_PATH_SPLIT : GLN_PATH_GROUPED;
    c.seed = (uint64_t)o->seed;
    c.tokens = T;
    c.exact = o->exact;
    c.trainable = 1;
    c.lr = (float)o->lr;
    c.quantized_weights = o->quantized_weights;
    return c;
}

/* The final loss: the mean over the last FINAL_WINDOW steps (fewer for short runs).  One step's
 * loss swings with which batch of the data set it saw, so a single step would be noisy. */
double train_final_loss(const double *losses, int64_t steps) {
    const int64_t w = steps < FINAL_WINDOW ? steps : FINAL_WINDOW;
    double s = 0;
    for (int64_t i = steps - w; i < steps; i++) s += losses[i];
    return s / (double)w;
}

int train_final_window(const train_opts_t *o) { return (int)(o->steps < FINAL_WINDOW ? o->steps : FINAL_WINDOW); }

int64_t train_step_tokens(const train_opts_t *o) { return o->tokens * o->microbatches; }

void train_model_desc(const train_opts_t *o, char *buf, size_t size) {
    char preset[128] = "", batch[96];
    if (o->preset) snprintf(preset, sizeof preset, " (preset %s: %s, one MoE layer)", o->preset->name, o->preset->like);
    if (o->microbatches > 1)
        snprintf(batch, sizeof batch, "%lld microbatches x %lld = %lld tokens/step", (long long)o->microbatches,
                 (long long)o->tokens, (long long)train_step_tokens(o));
    else
        snprintf(batch, sizeof batch, "%lld tokens/step", (long long)o->tokens);
    snprintf(buf, size, "MoE MLP H=%lld F=%lld E=%lld k=%lld %s%s, %s", (long long)o->hidden, (long long)o->ffn,
             (long long)o->experts, (long long)o->topk, o->act == 0 ? "swiglu" : "gelu", preset, batch);
}

int train_find_bf16(const train_opts_t *o) {
    for (int r = 0; r < o->nrec; r++)
        if (strcmp(o->recipes[r]->name, "bf16") == 0) return r;
    return -1;
}

void train_cell(char *cell, const char *f, double v) { snprintf(cell, REPORT_CELL, f, v); }

/* Doubles travel as INT64: the gather only moves bytes. */
gln_status_t train_gather_loss_sum(train_run_t *tr, int64_t count, double *sum) {
    gln_status_t st = gln_comm_allgather(tr->l->comm, tr->tok_loss, tr->all_loss, (size_t)tr->T, GLN_DTYPE_INT64);
    if (st != GLN_STATUS_SUCCESS) return st;
    double s = *sum;
    for (int64_t t = 0; t < count; t++) s += tr->all_loss[t];
    *sum = s;
    return GLN_STATUS_SUCCESS;
}

gln_status_t train_max_seconds(train_run_t *tr, gln_status_t st, double busy, double *seconds) {
    float mine = (float)busy, most = mine;
    if (st == GLN_STATUS_SUCCESS)
        st = gln_comm_allreduce(tr->l->comm, &mine, &most, 1, GLN_DTYPE_FP32, GLN_REDUCE_MAX);
    *seconds = most;
    return st;
}

void train_progress_loss(const char *name, int64_t done, int64_t total, double loss) {
    char extra[64];
    snprintf(extra, sizeof extra, "loss %.4g", loss);
    report_progress(stderr, name, done, total, extra);
}

int train_device_comm_nccl(const train_opts_t *o) { return o->comm == 0 && (o->comm_given || gln_nccl_available()); }

/* --comm mpi on several ranks (on one rank it is the self communicator) */
static int device_comm_mpi(const train_run_t *tr) { return tr->o->comm == 2 && tr->l->size > 1; }

const char *train_device_comm_name(const train_run_t *tr) {
    if (train_device_comm_nccl(tr->o)) return "NCCL";
    return device_comm_mpi(tr) ? "MPI on device memory" : "the self communicator";
}

/* The expert weights' group communicates over NCCL (world size 1: its all-gathers and
 * reduce-scatters are real NCCL calls on the device stream, captured with the step under --graph),
 * over MPI on device memory (--comm mpi under mpirun: every rank its own context, possibly all on
 * one GPU, which NCCL refuses; each collective synchronizes the stream), or, with --comm self,
 * --comm mpi on one rank or a library without NCCL, the self communicator bound to the context. */
gln_status_t train_device_comm_create(const train_run_t *tr, gln_comm_t **comm) {
    if (train_device_comm_nccl(tr->o)) {
        gln_nccl_id_t id;
        const gln_status_t st = gln_nccl_id_create(&id);
        return st != GLN_STATUS_SUCCESS ? st : gln_comm_create_nccl(tr->ctx, &id, 0, 1, comm);
    }
    if (device_comm_mpi(tr)) return gln_comm_create_mpi(tr->ctx, NULL /* MPI_COMM_WORLD */, comm);
    return gln_comm_create_self(tr->ctx, comm);
}

/* The device loss buffer of this rank's tokens, all ranks' gathered after it (in rank order, the
 * global token order) over the device communicator; one rank: nothing to gather. */
gln_status_t train_device_gather_loss(const train_run_t *tr, gln_comm_t *comm, const double *tok_loss,
                                      double *all_loss) {
    if (tr->l->size == 1) return GLN_STATUS_SUCCESS;
    return gln_comm_allgather(comm, tok_loss, all_loss, (size_t)tr->T, GLN_DTYPE_INT64);
}
