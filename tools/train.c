/* `grouplin train`: train the MoE MLP of moe_model.c once per recipe on a task -- a byte-level
 * language model on real text (lm_model.c, train_lm.c; the default) or imitating a synthetic
 * teacher MoE (task.c) -- report losses, speed and FP8-vs-bf16 quality, write loss.csv / loss.png. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "launch.h"
#include "moe_model.h"
#include "options.h"
#include "report.h"
#include "task.h"
#include "train.h"

static const char *const CMD = "train";

enum {
    O_RECIPES = 256, O_STEPS, O_TOKENS, O_HIDDEN, O_FFN, O_EXPERTS, O_TOPK, O_LR, O_SEED, O_PATH,
    O_ACT, O_BACKEND, O_OUT, O_EXACT, O_NOPLOT, O_QUIET, O_PROGRESS, O_EXPECT, O_DUMP, O_BATCHES,
    O_THREADS, O_TASK, O_DATA, O_CONTEXT, O_GRAPH, O_SYNC_EVERY, O_COMM
};

static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},           {"recipes", required_argument, NULL, O_RECIPES},
    {"steps", required_argument, NULL, O_STEPS}, {"tokens", required_argument, NULL, O_TOKENS},
    {"hidden", required_argument, NULL, O_HIDDEN}, {"ffn", required_argument, NULL, O_FFN},
    {"experts", required_argument, NULL, O_EXPERTS}, {"topk", required_argument, NULL, O_TOPK},
    {"lr", required_argument, NULL, O_LR},       {"seed", required_argument, NULL, O_SEED},
    {"path", required_argument, NULL, O_PATH},   {"activation", required_argument, NULL, O_ACT},
    {"backend", required_argument, NULL, O_BACKEND}, {"out", required_argument, NULL, O_OUT},
    {"exact-data", no_argument, NULL, O_EXACT},  {"no-plot", no_argument, NULL, O_NOPLOT},
    {"quiet", no_argument, NULL, O_QUIET},       {"progress", no_argument, NULL, O_PROGRESS},
    {"expect-loss-drop", required_argument, NULL, O_EXPECT},
    {"dump-losses", required_argument, NULL, O_DUMP},
    {"batches", required_argument, NULL, O_BATCHES}, {"threads", required_argument, NULL, O_THREADS},
    {"task", required_argument, NULL, O_TASK},   {"data", required_argument, NULL, O_DATA},
    {"context", required_argument, NULL, O_CONTEXT},
    {"graph", no_argument, NULL, O_GRAPH},       {"sync-every", required_argument, NULL, O_SYNC_EVERY},
    {"comm", required_argument, NULL, O_COMM},
    {NULL, 0, NULL, 0}};

static const char help[] =
    "usage: grouplin train [options]\n"
    "       mpirun -np R grouplin train [options]   (expert weights sharded over R ranks)\n"
    "\n"
    "Train a small mixture-of-experts MLP (FP32 top-k router, FC1 grouped linear, SwiGLU or GELU,\n"
    "FC2 grouped linear, gate-weighted unpermute) once per recipe; Adam on FP32 master weights.\n"
    "Tasks:\n"
    "  lm (default)  a byte-level language model: the previous --context bytes, each embedded by\n"
    "                its position's FP32 table [256, H], summed into x, then the MoE MLP, then an\n"
    "                FP32 projection to 256 logits; loss = cross-entropy of the next byte (nats).\n"
    "                The text (--data) splits into training (first 90%) and validation (last 10%)\n"
    "                bytes; batches are random training windows, the validation loss covers every\n"
    "                window of the validation bytes.\n"
    "  teacher       imitate a fixed random teacher MoE of the same shape on random inputs;\n"
    "                loss = mean squared error.\n"
    "\n"
    "options:\n"
    "  --task lm|teacher      (default lm)\n"
    "  --recipes LIST         comma-separated: fp32, bf16, fp8-delayed, fp8-current, mxfp8,\n"
    "                         fp8-block (default bf16,mxfp8,fp8-current)\n"
    "  --steps N              optimizer steps per recipe (default: lm 400, teacher 150)\n"
    "  --tokens N             tokens per step, global batch split across ranks (default 512)\n"
    "  --hidden N             model width H (default 64)\n"
    "  --ffn N                expert FFN width F (default 128)\n"
    "  --experts N            number of experts E (default 8)\n"
    "  --topk N               experts per token k (default 2)\n"
    "  --lr X                 Adam learning rate (default: lm 0.003, teacher 0.01)\n"
    "  --seed N               seed of the data and the student (default 1)\n"
    "  --data FILE            lm: the text to train on (default: every regular file under\n"
    "                         " LM_DEFAULT_CORPUS ", by name)\n"
    "  --context N            lm: bytes of context (default 8)\n"
    "  --batches N            teacher: size of the data set in batches of --tokens, cycled\n"
    "                         through (default 4; 0 = a fresh random batch every step)\n"
    "  --path split|grouped   grouped linear execution path (default: split on the CPU, grouped\n"
    "                         on CUDA, which needs it: the expert splits stay on the device)\n"
    "  --activation swiglu|gelu   (default swiglu: FC1 is H -> 2F; gelu: H -> F)\n"
    "  --backend cpu|cuda     (default cpu).  cuda: task lm, one rank; the whole step runs on the\n"
    "                         GPU (MoE kernels, grouped GEMMs with device splits, Adam), bitwise\n"
    "                         reproducible run to run; the first step is a warm-up, not timed\n"
    "  --graph                cuda: capture one training step in a CUDA graph and replay it\n"
    "  --sync-every N         cuda: read the losses back every N steps for the progress line\n"
    "  --comm nccl|self       cuda: the expert weights' sharded group communicates over NCCL\n"
    "                         (world size 1; the default when the library has NCCL) or the\n"
    "                         in-process self communicator bound to the device context\n"
    "                         (default 50); nothing else waits for the GPU inside a step\n"
    "  --threads N            CPU threads of the library (default 0: OPENBLAS_NUM_THREADS, else\n"
    "                         all cores)\n"
    "  --out DIR              where loss.csv and loss.png go (default .; created, one level,\n"
    "                         before training starts)\n"
    "  --exact-data           teacher: small fixed-point data and weights so that runs on any\n"
    "                         number of ranks give bitwise identical losses (fp32 / bf16)\n"
    "  --no-plot              do not run gnuplot\n"
    "  --quiet                print nothing but errors\n"
    "  --progress             draw the progress bar even when stderr is not a terminal\n"
    "  --expect-loss-drop F   exit 1 unless final loss <= initial loss / F for every recipe\n"
    "                         (final = mean training loss over the last 10 steps)\n"
    "  --dump-losses FILE     write every loss as a hex float (%a) for exact comparisons\n"
    "                         (checked before training; on a write error neither it nor\n"
    "                         loss.csv is left behind)\n"
    "  -h, --help             this help\n"
    "\n"
    "exit status: 0 ok, 1 failure (library error, --expect-loss-drop not met), 2 usage error\n";

static int handle(int code, const char *arg, void *user) {
    train_opts_t *o = user;
    static const char *const paths[] = {"split", "grouped"}, *const acts[] = {"swiglu", "gelu"};
    static const char *const backends[] = {"cpu", "cuda"}, *const tasks[] = {"lm", "teacher"};
    static const char *const comms[] = {"nccl", "self"};
    switch (code) {
    case O_RECIPES: return opt_recipes(CMD, arg, o->recipes, &o->nrec);
    case O_STEPS: return opt_i64(CMD, "steps", arg, 1, 1000000, &o->steps);
    case O_TOKENS: return opt_i64(CMD, "tokens", arg, 1, 1 << 22, &o->tokens);
    case O_HIDDEN: return opt_i64(CMD, "hidden", arg, 1, 16384, &o->hidden);
    case O_FFN: return opt_i64(CMD, "ffn", arg, 1, 65536, &o->ffn);
    case O_EXPERTS: return opt_i64(CMD, "experts", arg, 1, 1024, &o->experts);
    case O_TOPK: return opt_i64(CMD, "topk", arg, 1, 1024, &o->topk);
    case O_LR: return opt_double(CMD, "lr", arg, 1e-9, 10.0, &o->lr);
    case O_SEED: return opt_i64(CMD, "seed", arg, 0, INT64_MAX, &o->seed);
    case O_PATH: o->path_given = 1; return opt_choice(CMD, "path", arg, paths, 2, &o->path);
    case O_GRAPH: o->graph = 1; return CLI_OK;
    case O_SYNC_EVERY: return opt_i64(CMD, "sync-every", arg, 1, INT64_MAX, &o->sync_every);
    case O_COMM: o->comm_given = 1; return opt_choice(CMD, "comm", arg, comms, 2, &o->comm);
    case O_ACT: return opt_choice(CMD, "activation", arg, acts, 2, &o->act);
    case O_BACKEND: return opt_choice(CMD, "backend", arg, backends, 2, &o->backend);
    case O_OUT: o->out_dir = arg; return CLI_OK;
    case O_EXACT: o->exact = o->teacher_only = 1; return CLI_OK;
    case O_NOPLOT: o->plot = 0; return CLI_OK;
    case O_QUIET: o->quiet = 1; return CLI_OK;
    case O_PROGRESS: o->progress = 1; return CLI_OK;
    case O_EXPECT: return opt_double(CMD, "expect-loss-drop", arg, 1.0, 1e12, &o->expect_drop);
    case O_DUMP: o->dump = arg; return CLI_OK;
    case O_BATCHES: o->teacher_only = 1; return opt_i64(CMD, "batches", arg, 0, INT64_MAX, &o->batches);
    case O_THREADS: return opt_i64(CMD, "threads", arg, 0, 1024, &o->threads);
    case O_TASK: return opt_choice(CMD, "task", arg, tasks, 2, &o->task);
    case O_DATA: o->data = arg; o->lm_only = 1; return CLI_OK;
    case O_CONTEXT: o->lm_only = 1; return opt_i64(CMD, "context", arg, 1, 1024, &o->context);
    }
    return opt_usage_error(CMD, "internal: unhandled option %d", code);
}

static int parse(int argc, char **argv, train_opts_t *o, int *help_shown) {
    memset(o, 0, sizeof *o);
    o->recipes[0] = tool_recipe_find("bf16");
    o->recipes[1] = tool_recipe_find("mxfp8");
    o->recipes[2] = tool_recipe_find("fp8-current");
    o->nrec = 3;
    o->tokens = 512;
    o->hidden = 64;
    o->ffn = 128;
    o->experts = 8;
    o->topk = 2;
    o->seed = 1;
    o->batches = 4;
    o->context = 8;
    o->sync_every = 50;
    o->plot = 1;
    o->out_dir = ".";
    int rc = opt_parse(CMD, argc, argv, longopts, help, handle, o, help_shown);
    if (rc != CLI_OK || *help_shown) return rc;
    if (o->steps == 0) o->steps = o->task == TRAIN_TASK_LM ? 400 : 150;
    if (o->lr == 0) o->lr = o->task == TRAIN_TASK_LM ? 0.003 : 0.01;
    if (o->task == TRAIN_TASK_LM && o->teacher_only)
        return opt_usage_error(CMD, "--exact-data and --batches apply to --task teacher only");
    if (o->task == TRAIN_TASK_TEACHER && o->lm_only)
        return opt_usage_error(CMD, "--data and --context apply to --task lm only");
    if (o->topk > o->experts)
        return opt_usage_error(CMD, "--topk %lld must be <= --experts %lld", (long long)o->topk,
                               (long long)o->experts);
    const int ranks = tool_env_size();
    if (o->graph && o->backend != 1) return opt_usage_error(CMD, "--graph needs --backend cuda");
    if (o->comm_given && o->backend != 1) return opt_usage_error(CMD, "--comm needs --backend cuda");
    if (o->backend == 1) {
        if (o->task != TRAIN_TASK_LM)
            return opt_usage_error(CMD, "--backend cuda trains --task lm only (the teacher task's data "
                                        "and loss are host loops)");
        if (o->path_given && o->path == 0)
            return opt_usage_error(CMD, "--backend cuda needs --path grouped (the expert splits are "
                                        "computed on the device)");
        o->path = 1;
        if (ranks > 1)
            return opt_usage_error(CMD, "--backend cuda runs on one rank (the expert weights' group "
                                        "has no device transport yet)");
        if (!gln_backend_available(GLN_BACKEND_CUDA))
            return opt_usage_error(CMD, "--backend cuda is not available (this build has no CUDA "
                                        "backend or no GPU is present)");
    }
    if (o->tokens % ranks != 0)
        return opt_usage_error(CMD, "--tokens %lld must be a multiple of the %d ranks",
                               (long long)o->tokens, ranks);
    return CLI_OK;
}

double train_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

moe_model_config_t train_model_config(const train_opts_t *o, const tool_recipe_t *r, int64_t T) {
    moe_model_config_t c;
    memset(&c, 0, sizeof c);
    c.shape.hidden = o->hidden;
    c.shape.ffn = o->ffn;
    c.shape.experts = (int32_t)o->experts;
    c.shape.topk = (int32_t)o->topk;
    c.shape.act = o->act == 0 ? GLN_ACT_SWIGLU : GLN_ACT_GELU;
    c.recipe = r;
    c.path = o->path == 0 ? GLN_PATH_SPLIT : GLN_PATH_GROUPED;
    c.seed = (uint64_t)o->seed;
    c.tokens = T;
    c.exact = o->exact;
    c.trainable = 1;
    c.lr = (float)o->lr;
    return c;
}

/* Squared error per token, dy = scale·2(y - target), and the global mean loss: per-token values
 * are gathered and summed in global token order, so the loss does not depend on the rank count. */
static gln_status_t loss_and_grad(train_run_t *tr, double *loss) {
    const int64_t T = tr->T, H = tr->o->hidden, Tg = T * tr->l->size;
    const float scale = tr->o->exact ? 1.0f : (float)(1.0 / ((double)Tg * (double)H));
    for (int64_t t = 0; t < T; t++) {
        double s = 0;
        for (int64_t h = 0; h < H; h++) {
            const float d = tr->y[t * H + h] - tr->target[t * H + h];
            s += (double)d * d;
            tr->dy[t * H + h] = 2.0f * d * scale;
        }
        tr->tok_loss[t] = s;
    }
    double sum = 0;
    gln_status_t st = train_gather_loss_sum(tr, Tg, &sum);
    *loss = sum / ((double)Tg * (double)H);
    return st;
}

/* Doubles travel as INT64: the gather only moves bytes. */
gln_status_t train_gather_loss_sum(train_run_t *tr, int64_t count, double *sum) {
    gln_status_t st = gln_comm_allgather(tr->l->comm, tr->tok_loss, tr->all_loss, (size_t)tr->T, GLN_DTYPE_INT64);
    if (st != GLN_STATUS_SUCCESS) return st;
    double s = 0;
    for (int64_t t = 0; t < count; t++) s += tr->all_loss[t];
    *sum = s;
    return GLN_STATUS_SUCCESS;
}

/* Train one recipe on the teacher task; losses[s] for every step; *seconds = time in the
 * student's steps (max over ranks). */
static gln_status_t train_teacher_recipe(train_run_t *tr, const tool_recipe_t *r, double *losses, double *seconds) {
    const train_opts_t *o = tr->o;
    moe_model_config_t mc = train_model_config(o, r, tr->T);
    moe_model_t *student = NULL;
    gln_status_t st = moe_model_create(tr->ctx, tr->l->comm, &mc, &student);
    double busy = 0;
    for (int64_t s = 0; st == GLN_STATUS_SUCCESS && s < o->steps; s++) {
        const int64_t batch = o->batches > 0 ? s % o->batches : s;
        task_inputs((uint64_t)o->seed, batch, tr->l->rank * tr->T, tr->T, o->hidden, o->exact, tr->x);
        st = moe_model_forward(tr->teacher, tr->x, tr->target);
        if (st != GLN_STATUS_SUCCESS) break;
        double t0 = train_now_s();
        st = moe_model_forward(student, tr->x, tr->y);
        if (st == GLN_STATUS_SUCCESS) st = loss_and_grad(tr, &losses[s]);
        if (st == GLN_STATUS_SUCCESS) st = moe_model_backward(student, tr->dy);
        if (st == GLN_STATUS_SUCCESS) st = moe_model_step(student);
        busy += train_now_s() - t0;
        if (tr->show_progress) {
            char extra[64];
            snprintf(extra, sizeof extra, "loss %.4g", losses[s]);
            report_progress(stderr, r->name, s + 1, o->steps, extra);
        }
    }
    if (tr->show_progress) report_progress_end(stderr);
    moe_model_destroy(student);
    float mine = (float)busy, most = mine;
    if (st == GLN_STATUS_SUCCESS)
        st = gln_comm_allreduce(tr->l->comm, &mine, &most, 1, GLN_DTYPE_FP32, GLN_REDUCE_MAX);
    *seconds = most;
    return st;
}

/* The final loss: the mean over the last FINAL_WINDOW steps (fewer for short runs).  One step's
 * loss swings with which batch of the data set it saw, so a single step would be noisy. */
double train_final_loss(const double *losses, int64_t steps) {
    const int64_t w = steps < FINAL_WINDOW ? steps : FINAL_WINDOW;
    double s = 0;
    for (int64_t i = steps - w; i < steps; i++) s += losses[i];
    return s / (double)w;
}

static void fmt(char *buf, const char *f, double v) { snprintf(buf, REPORT_CELL, f, v); }

static void print_teacher_results(const train_opts_t *o, const tool_launch_t *l, double *const *losses,
                          const double *secs) {
    moe_shape_t shape = {o->hidden, o->ffn, (int32_t)o->experts, (int32_t)o->topk,
                         o->act == 0 ? GLN_ACT_SWIGLU : GLN_ACT_GELU};
    const double flops = moe_expert_flops(&shape, o->tokens * o->topk);
    int bf16 = -1;
    for (int r = 0; r < o->nrec; r++)
        if (strcmp(o->recipes[r]->name, "bf16") == 0) bf16 = r;
    static const char *const head[] = {"recipe", "initial loss", "final loss", "drop", "vs bf16",
                                       "steps/s", "tokens/s", "GFLOP/s"};
    report_table_t t;
    report_table_init(&t, 8, head);
    for (int r = 0; r < o->nrec; r++) {
        char c[8][REPORT_CELL];
        const double first = losses[r][0], last = train_final_loss(losses[r], o->steps), sps = o->steps / secs[r];
        snprintf(c[0], REPORT_CELL, "%s", o->recipes[r]->name);
        fmt(c[1], "%.4g", first);
        fmt(c[2], "%.4g", last);
        fmt(c[3], "%.1fx", first / last);
        if (bf16 >= 0 && o->recipes[r]->recipe != GLN_RECIPE_NONE)
            fmt(c[4], "%.3f", last / train_final_loss(losses[bf16], o->steps));
        else
            snprintf(c[4], REPORT_CELL, "-");
        fmt(c[5], "%.1f", sps);
        fmt(c[6], "%.0f", sps * (double)o->tokens);
        fmt(c[7], "%.2f", sps * flops * 1e-9);
        const char *cells[8] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
        report_table_row(&t, cells);
    }
    printf("grouplin train: MoE MLP H=%lld F=%lld E=%lld k=%lld %s, %lld tokens/step, %lld steps, "
           "%d rank%s, cpu backend, %s path%s\n\n",
           (long long)o->hidden, (long long)o->ffn, (long long)o->experts, (long long)o->topk,
           o->act == 0 ? "swiglu" : "gelu", (long long)o->tokens, (long long)o->steps, l->size,
           l->size == 1 ? "" : "s", o->path == 0 ? "split" : "grouped", o->exact ? ", exact data" : "");
    report_table_print(&t, stdout);
    report_table_free(&t);
    printf("\ninitial = loss of step 0; final = mean loss of the last %d steps; drop = initial / final;\n"
           "vs bf16 = final loss relative to bf16; GFLOP/s counts the expert GEMMs\n"
           "(fprop + dgrad + wgrad = 6 * rows * H * (FC1 out + F) per step)\n",
           (int)(o->steps < FINAL_WINDOW ? o->steps : FINAL_WINDOW));
}

/* Before any step runs (rank 0): the --out directory exists (created here) and is writable, and
 * the --dump-losses file can be opened for writing, so a bad path fails at once, not after the
 * whole run.  The probe opens the dump file for appending (its contents stay) and removes it
 * again when it did not exist before. */
static int prepare_outputs(const train_opts_t *o) {
    struct stat sb;
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "grouplin train: cannot create --out directory '%s': %s\n", o->out_dir,
                strerror(errno));
        return CLI_FAIL;
    }
    if (stat(o->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "grouplin train: --out '%s' is not a directory\n", o->out_dir);
        return CLI_FAIL;
    }
    if (access(o->out_dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "grouplin train: cannot write into --out directory '%s': %s\n", o->out_dir,
                strerror(errno));
        return CLI_FAIL;
    }
    if (!o->dump) return CLI_OK;
    const int existed = access(o->dump, F_OK) == 0;
    FILE *f = fopen(o->dump, "a");
    if (!f) {
        fprintf(stderr, "grouplin train: cannot write --dump-losses file '%s': %s\n", o->dump,
                strerror(errno));
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
static int write_outputs(const train_opts_t *o, double *const *losses) {
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
        fprintf(stderr, "grouplin train: cannot write %s: %s (no loss.csv or dump written)\n", failed,
                strerror(err));
        return CLI_FAIL;
    }
    static const char *const titles[] = {"byte-level language model, training loss", "synthetic teacher task"};
    static const char *const ylabels[] = {"cross-entropy (nats per byte)", "MSE loss"};
    int plotted = o->plot ? report_plot_losses(o->out_dir, csv, png, titles[o->task], ylabels[o->task],
                                               o->nrec, names,
                                               o->quiet ? NULL : stdout)
                          : 1;
    if (!o->quiet) printf("wrote %s%s%s\n", csv, plotted == 0 ? ", " : "", plotted == 0 ? png : "");
    return CLI_OK;
}

/* Exit 1 unless every recipe's loss fell by the factor. */
static int check_drop(const train_opts_t *o, double *const *losses) {
    if (o->expect_drop <= 0) return CLI_OK;
    int rc = CLI_OK;
    for (int r = 0; r < o->nrec; r++) {
        const double drop = losses[r][0] / train_final_loss(losses[r], o->steps);
        if (!(drop >= o->expect_drop)) {
            fprintf(stderr, "grouplin train: FAIL: %s loss fell by %.3gx, expected >= %.3gx\n",
                    o->recipes[r]->name, drop, o->expect_drop);
            rc = CLI_FAIL;
        }
    }
    return rc;
}

/* exact.h: sums of up to 256 products of 8-bit fixed-point values are exact in FP32.  The
 * longest reductions: over H (FC1 fprop, FC2 dgrad, router), FC1's outputs (its dgrad), F (FC2
 * fprop) and the rows of one expert (wgrads; at worst every token on one expert). */
static void exact_data_note(const train_opts_t *o) {
    const int64_t f1 = o->act == 0 ? 2 * o->ffn : o->ffn;
    int64_t terms = o->hidden;
    if (f1 > terms) terms = f1;
    if (o->tokens * o->topk > terms) terms = o->tokens * o->topk;
    if (terms > 256)
        printf("note: --exact-data is exact only while every GEMM reduction has <= 256 terms; this\n"
               "configuration has up to %lld, so losses may depend on the rank count\n", (long long)terms);
}

static int run(train_run_t *tr, double **losses, double *secs) {
    const train_opts_t *o = tr->o;
    if (o->exact && tr->l->rank == 0 && !o->quiet) exact_data_note(o);
    for (int r = 0; r < o->nrec; r++) {
        gln_status_t st = o->task == TRAIN_TASK_LM ? train_lm_recipe(tr, r, losses[r], &secs[r])
                                                   : train_teacher_recipe(tr, o->recipes[r], losses[r], &secs[r]);
        if (st != GLN_STATUS_SUCCESS) {
            fprintf(stderr, "grouplin train: rank %d, recipe %s: %s: %s\n", tr->l->rank,
                    o->recipes[r]->name, gln_status_string(st), tool_last_error());
            return CLI_FAIL;
        }
    }
    if (tr->l->rank != 0) return CLI_OK;
    if (!o->quiet && o->task == TRAIN_TASK_LM) train_lm_print(tr, losses, secs);
    if (!o->quiet && o->task == TRAIN_TASK_TEACHER) print_teacher_results(o, tr->l, losses, secs);
    int rc = write_outputs(o, losses);
    int drop = check_drop(o, losses);
    return rc != CLI_OK ? rc : drop;
}

/* The buffers of the task (per rank); 0 when one cannot be allocated (tool_last_error says
 * which). */
static int alloc_task(train_run_t *tr) {
    const train_opts_t *o = tr->o;
    const size_t th = (size_t)(tr->T * o->hidden);
    int ok = (tr->tok_loss = tool_alloc((size_t)tr->T, sizeof(double), "the per-token losses")) &&
             (tr->all_loss = tool_alloc((size_t)o->tokens, sizeof(double), "the gathered losses"));
    if (o->task == TRAIN_TASK_LM)
        return ok && (tr->ctx_bytes = tool_alloc((size_t)(tr->T * o->context), 1, "the context bytes")) &&
               (tr->next = tool_alloc((size_t)tr->T, 1, "the target bytes"));
    return (tr->x = tool_alloc(th, sizeof(float), "the inputs x [tokens, hidden]")) &&
           (tr->target = tool_alloc(th, sizeof(float), "the targets [tokens, hidden]")) &&
           (tr->y = tool_alloc(th, sizeof(float), "the outputs y [tokens, hidden]")) &&
           (tr->dy = tool_alloc(th, sizeof(float), "the gradients dy [tokens, hidden]")) && ok;
}

static void free_task(train_run_t *tr) {
    void *bufs[] = {tr->x, tr->target, tr->y, tr->dy, tr->tok_loss, tr->all_loss, tr->ctx_bytes, tr->next};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    lm_text_free(&tr->text);
}

int cmd_train(int argc, char **argv) {
    train_opts_t o;
    int help_shown = 0;
    int rc = parse(argc, argv, &o, &help_shown);
    if (rc != CLI_OK || help_shown) return rc;

    tool_launch_t l;
    if (tool_launch_init(&argc, &argv, &l) != CLI_OK) return CLI_FAIL;
    train_run_t tr;
    memset(&tr, 0, sizeof tr);
    tr.o = &o;
    tr.l = &l;
    tr.T = o.tokens / l.size;
    tr.show_progress = l.rank == 0 && !o.quiet && (o.progress || isatty(2));
    double *losses[TOOL_MAX_RECIPES] = {0}, secs[TOOL_MAX_RECIPES] = {0};
    /* Output paths first (rank 0 writes them; every rank stops when they are unusable). */
    rc = l.rank == 0 ? prepare_outputs(&o) : CLI_OK;
    /* The text next: every rank reads it (only rank 0 says what is wrong with it). */
    if (rc == CLI_OK && o.task == TRAIN_TASK_LM) rc = lm_text_load(o.data, o.context, l.rank == 0, &tr.text);
    if (tool_launch_any(&l, rc != CLI_OK)) {
        lm_text_free(&tr.text);
        tool_launch_fini(&l);
        return CLI_FAIL;
    }
    int ok = alloc_task(&tr);
    for (int r = 0; r < o.nrec; r++)
        ok = ok && (losses[r] = tool_alloc((size_t)o.steps, sizeof(double), "the loss history"));
    gln_context_options_t co = GLN_CONTEXT_OPTIONS_INIT;
    co.num_threads = (int)o.threads;
    co.backend = o.backend == 1 ? GLN_BACKEND_CUDA : GLN_BACKEND_CPU;
    gln_status_t st = ok ? gln_context_create(&co, &tr.ctx) : GLN_STATUS_OUT_OF_MEMORY;
    if (st == GLN_STATUS_SUCCESS && o.task == TRAIN_TASK_TEACHER) {
        /* The teacher: same shape, its own seed, FP32 throughout, never trained. */
        moe_model_config_t tc = train_model_config(&o, tool_recipe_find("fp32"), tr.T);
        tc.seed = (uint64_t)o.seed * 7919u + 104729u;
        tc.trainable = 0;
        st = moe_model_create(tr.ctx, l.comm, &tc, &tr.teacher);
    }
    if (st != GLN_STATUS_SUCCESS) {
        fprintf(stderr, "grouplin train: setup failed: %s: %s\n", gln_status_string(st), tool_last_error());
        rc = CLI_FAIL;
    } else {
        rc = run(&tr, losses, secs);
    }
    rc = tool_launch_any(&l, rc != CLI_OK) ? (rc != CLI_OK ? rc : CLI_FAIL) : CLI_OK;
    moe_model_destroy(tr.teacher);
    gln_context_destroy(tr.ctx);
    for (int r = 0; r < o.nrec; r++) free(losses[r]);
    free_task(&tr);
    tool_launch_fini(&l);
    return rc;
}
