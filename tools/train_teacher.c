/* `grouplin train --task teacher`: the student imitates a fixed random teacher MoE of its own
 * shape (FP32 throughout, never trained) on the synthetic inputs of task.c; the loss is the mean
 * squared error.  With --exact-data every value is small fixed point (exact.h), so any number of
 * ranks gives bitwise the same losses.
 *
 * On CUDA the models run on the device (their expert group over the device communicator: MPI on
 * device memory under mpirun, else NCCL or the self communicator) while the data and the loss stay
 * the host loops they are on the CPU: each step uploads x, reads back the teacher's and the
 * student's outputs and uploads the loss gradient -- a few [T, H] copies, for a task whose point is
 * the loss curve (and its exactness), not speed. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "report.h"
#include "task.h"
#include "train.h"
#include "train_ops.h"

typedef struct teacher_task {
    moe_model_t *teacher;
    float *x, *target, *y, *dy;     /* [T, H], host: the data, the loss and its gradient */
    float *bx, *btarget, *by, *bdy; /* the same in backend memory: device copies on CUDA, else aliases */
    gln_comm_t *comm;               /* the models' group: on CUDA the device's (owned), else tr->l->comm */
    int on_device;
} teacher_task_t;

/* Host → backend (nothing when they are one array, as on the CPU). */
static gln_status_t put(const train_run_t *tr, float *dst, const float *src) {
    if (dst == src) return GLN_STATUS_SUCCESS;
    return gln_memcpy(tr->ctx, dst, src, (size_t)(tr->T * tr->o->hidden) * sizeof(float), GLN_COPY_HOST_TO_BACKEND);
}

/* Backend → host (waits for the device). */
static gln_status_t get(const train_run_t *tr, float *dst, const float *src) {
    if (dst == src) return GLN_STATUS_SUCCESS;
    return gln_memcpy(tr->ctx, dst, src, (size_t)(tr->T * tr->o->hidden) * sizeof(float), GLN_COPY_BACKEND_TO_HOST);
}

/* The backend arrays and the communicator: on CUDA device buffers and the device communicator
 * (collective over the ranks), on the CPU the host arrays and the launch's communicator. */
static gln_status_t backend_arrays(train_run_t *tr) {
    teacher_task_t *k = tr->task;
    k->on_device = top_on_device(tr->ctx);
    if (!k->on_device) {
        k->bx = k->x, k->btarget = k->target, k->by = k->y, k->bdy = k->dy;
        k->comm = tr->l->comm;
        return GLN_STATUS_SUCCESS;
    }
    gln_status_t st = train_device_comm_create(tr, &k->comm);
    float **bufs[] = {&k->bx, &k->btarget, &k->by, &k->bdy};
    const size_t bytes = (size_t)(tr->T * tr->o->hidden) * sizeof(float);
    for (size_t i = 0; st == GLN_STATUS_SUCCESS && i < sizeof bufs / sizeof bufs[0]; i++)
        st = gln_malloc(tr->ctx, bytes ? bytes : 1, (void **)bufs[i]);
    return st;
}

static int teacher_alloc(train_run_t *tr) {
    const size_t th = (size_t)(tr->T * tr->o->hidden);
    teacher_task_t *k = tr->task = tool_alloc(1, sizeof(teacher_task_t), "the teacher task");
    return k && (k->x = tool_alloc(th, sizeof(float), "the inputs x [tokens, hidden]")) &&
           (k->target = tool_alloc(th, sizeof(float), "the targets [tokens, hidden]")) &&
           (k->y = tool_alloc(th, sizeof(float), "the outputs y [tokens, hidden]")) &&
           (k->dy = tool_alloc(th, sizeof(float), "the gradients dy [tokens, hidden]"));
}

/* exact.h: sums of up to 256 products of 8-bit fixed-point values are exact in FP32.  The
 * longest reductions: over H (FC1 fprop, FC2 dgrad, router), FC1's outputs (its dgrad), F (FC2
 * fprop) and the rows of one expert (wgrads; at worst every token on one expert). */
static void exact_data_note(const train_opts_t *o) {
    const int64_t f1 = o->act == 0 ? 2 * o->ffn : o->ffn;
    int64_t terms = o->hidden;
    if (f1 > terms) terms = f1;
    /* a wgrad sums over every microbatch of the step */
    const int64_t wgrad_terms = train_step_tokens(o) * o->topk;
    if (wgrad_terms > terms) terms = wgrad_terms;
    if (terms > 256)
        printf("note: --exact-data is exact only while every GEMM reduction has <= 256 terms; this\n"
               "configuration has up to %lld, so losses may depend on the rank count\n", (long long)terms);
}

/* The teacher: same shape, its own seed, FP32 throughout, never trained. */
static gln_status_t teacher_create(train_run_t *tr) {
    const train_opts_t *o = tr->o;
    teacher_task_t *k = tr->task;
    moe_model_config_t tc = train_model_config(o, tool_recipe_find("fp32"), tr->T);
    tc.seed = (uint64_t)o->seed * 7919u + 104729u;
    tc.trainable = 0;
    gln_status_t st = backend_arrays(tr);
    if (st == GLN_STATUS_SUCCESS) st = moe_model_create(tr->ctx, k->comm, &tc, &k->teacher);
    if (st == GLN_STATUS_SUCCESS && o->exact && tr->l->rank == 0 && !o->quiet) exact_data_note(o);
    return st;
}

/* Squared error per token, dy = scale·2(y - target) (the gradient of the step's mean loss over
 * all its microbatches; --exact-data: of the sum), and *sum += this microbatch's squared errors:
 * per-token values gathered and summed in global token order (microbatch j holds the step's
 * global tokens [j·Tg, (j+1)·Tg)), so the loss depends neither on the rank count nor on how the
 * step's tokens are cut into microbatches, as long as the sums are exact. */
static gln_status_t loss_and_grad(train_run_t *tr, double *sum) {
    const teacher_task_t *k = tr->task;
    const int64_t T = tr->T, H = tr->o->hidden, Tg = T * tr->l->size, Ts = Tg * tr->o->microbatches;
    const float scale = tr->o->exact ? 1.0f : (float)(1.0 / ((double)Ts * (double)H));
    for (int64_t t = 0; t < T; t++) {
        double s = 0;
        for (int64_t h = 0; h < H; h++) {
            const float d = k->y[t * H + h] - k->target[t * H + h];
            s += (double)d * d;
            k->dy[t * H + h] = 2.0f * d * scale;
        }
        tr->tok_loss[t] = s;
    }
    return train_gather_loss_sum(tr, Tg, sum);
}

/* Microbatch j of step s: the teacher's target, then the student's forward, loss and backward
 * (*busy: the student's time). */
static gln_status_t microbatch(train_run_t *tr, moe_model_t *student, int64_t s, int64_t j, double *sum,
                               double *busy) {
    const train_opts_t *o = tr->o;
    const teacher_task_t *k = tr->task;
    const int64_t batch = o->batches > 0 ? s % o->batches : s;
    task_inputs((uint64_t)o->seed, batch, j * o->tokens + tr->l->rank * tr->T, tr->T, o->hidden, o->exact, k->x);
    gln_status_t st = put(tr, k->bx, k->x);
    if (st == GLN_STATUS_SUCCESS) st = moe_model_forward(k->teacher, k->bx, k->btarget, 0);
    if (st == GLN_STATUS_SUCCESS) st = get(tr, k->target, k->btarget);
    if (st != GLN_STATUS_SUCCESS) return st;
    const double t0 = train_now_s();
    st = moe_model_forward(student, k->bx, k->by, j);
    if (st == GLN_STATUS_SUCCESS) st = get(tr, k->y, k->by);
    if (st == GLN_STATUS_SUCCESS) st = loss_and_grad(tr, sum);
    if (st == GLN_STATUS_SUCCESS) st = put(tr, k->bdy, k->dy);
    if (st == GLN_STATUS_SUCCESS) st = moe_model_backward(student, k->bdy);
    *busy += train_now_s() - t0;
    return st;
}

static gln_status_t teacher_recipe(train_run_t *tr, int r, double *losses, double *seconds) {
    const train_opts_t *o = tr->o;
    const teacher_task_t *k = tr->task;
    const tool_recipe_t *rec = o->recipes[r];
    moe_model_config_t mc = train_model_config(o, rec, tr->T);
    moe_model_t *student = NULL;
    gln_status_t st = moe_model_create(tr->ctx, k->comm, &mc, &student);
    double busy = 0;
    const int64_t Ts = train_step_tokens(o);
    for (int64_t s = 0; st == GLN_STATUS_SUCCESS && s < o->steps; s++) {
        double sum = 0;
        for (int64_t j = 0; st == GLN_STATUS_SUCCESS && j < o->microbatches; j++)
            st = microbatch(tr, student, s, j, &sum, &busy);
        if (st != GLN_STATUS_SUCCESS) break;
        losses[s] = sum / ((double)Ts * (double)o->hidden);
        double t0 = train_now_s();
        st = moe_model_step(student);
        if (st == GLN_STATUS_SUCCESS && k->on_device) st = gln_synchronize(tr->ctx); /* the step's time */
        busy += train_now_s() - t0;
        if (tr->show_progress) train_progress_loss(rec->name, s + 1, o->steps, losses[s]);
    }
    if (tr->show_progress) report_progress_end(stderr);
    if (st == GLN_STATUS_SUCCESS && k->on_device) st = gln_context_async_error(tr->ctx);
    moe_model_destroy(student);
    return train_max_seconds(tr, st, busy, seconds);
}

static void teacher_print(const train_run_t *tr, double *const *losses, const double *secs) {
    const train_opts_t *o = tr->o;
    const moe_shape_t shape = train_shape(o);
    const int64_t Ts = train_step_tokens(o);
    const double flops = moe_expert_flops(&shape, Ts * o->topk);
    const int bf16 = train_find_bf16(o);
    static const char *const head[] = {"recipe", "initial loss", "final loss", "drop", "vs bf16",
                                       "steps/s", "tokens/s", "GFLOP/s"};
    report_table_t t;
    report_table_init(&t, 8, head);
    for (int r = 0; r < o->nrec; r++) {
        char c[8][REPORT_CELL];
        const double first = losses[r][0], last = train_final_loss(losses[r], o->steps), sps = o->steps / secs[r];
        snprintf(c[0], REPORT_CELL, "%s", o->recipes[r]->name);
        train_cell(c[1], "%.4g", first);
        train_cell(c[2], "%.4g", last);
        train_cell(c[3], "%.1fx", first / last);
        if (bf16 >= 0 && o->recipes[r]->recipe != GLN_RECIPE_NONE)
            train_cell(c[4], "%.3f", last / train_final_loss(losses[bf16], o->steps));
        else
            snprintf(c[4], REPORT_CELL, "-");
        train_cell(c[5], "%.1f", sps);
        train_cell(c[6], "%.0f", sps * (double)Ts);
        train_cell(c[7], "%.2f", sps * flops * 1e-9);
        const char *cells[8] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
        report_table_row(&t, cells);
    }
    char model[256];
    train_model_desc(o, model, sizeof model);
    printf("grouplin train: %s, %lld steps, "
           "%d rank%s, %s backend, %s path%s%s%s\n\n",
           model, (long long)o->steps, tr->l->size,
           tr->l->size == 1 ? "" : "s", o->backend ? "cuda" : "cpu", o->path == 0 ? "split" : "grouped",
           o->exact ? ", exact data" : "", o->backend ? ", expert weights sharded over " : "",
           o->backend ? train_device_comm_name(tr) : "");
    report_table_print(&t, stdout);
    report_table_free(&t);
    printf("\ninitial = loss of step 0; final = mean loss of the last %d steps; drop = initial / final;\n"
           "vs bf16 = final loss relative to bf16; GFLOP/s counts the expert GEMMs\n"
           "(fprop + dgrad + wgrad = 6 * rows * H * (FC1 out + F) per step)\n",
           train_final_window(o));
}

static void teacher_teardown(train_run_t *tr) {
    teacher_task_t *k = tr->task;
    if (!k) return;
    moe_model_destroy(k->teacher);
    if (k->on_device) {
        float *bufs[] = {k->bx, k->btarget, k->by, k->bdy};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) gln_free(tr->ctx, bufs[i]);
        gln_comm_destroy(k->comm);
    }
    free(k->x);
    free(k->target);
    free(k->y);
    free(k->dy);
    free(k);
    tr->task = NULL;
}

const train_task_t train_task_teacher = {
    "synthetic teacher task", "MSE loss", NULL, teacher_alloc, teacher_create, teacher_recipe, teacher_print,
    teacher_teardown,
};
