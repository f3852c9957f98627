/* The options of `grouplin train` and its help text (see train.h). */
#include <string.h>

#include "cli.h"
#include "lm_data.h"
#include "train.h"
#include "train_ops.h"

static const char *const CMD = "train";

enum {
    O_RECIPES = 256, O_STEPS, O_TOKENS, O_HIDDEN, O_FFN, O_EXPERTS, O_TOPK, O_LR, O_SEED, O_PATH,
    O_ACT, O_BACKEND, O_OUT, O_EXACT, O_NOPLOT, O_QUIET, O_PROGRESS, O_EXPECT, O_DUMP, O_BATCHES,
    O_THREADS, O_TASK, O_DATA, O_CONTEXT, O_GRAPH, O_SYNC_EVERY, O_COMM, O_MICROBATCHES, O_PRESET,
    O_QWEIGHTS
};

/* The expert dimensions of real MoE models, one MoE layer each (the models stack 32 to 61), so
 * that the expert GEMMs dominate the step as they do there; 16384 tokens per microbatch. */
static const train_preset_t presets[] = {
    {"mixtral", "Mixtral-8x7B-like", 4096, 14336, 8, 2, 16384},
    {"qwen3", "Qwen3-30B-A3B-like", 2048, 768, 128, 8, 16384},
    {"deepseek", "DeepSeek-V3-like, 64 of its 256 experts", 7168, 2048, 64, 8, 16384},
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };

/* The bits of train_opts_t.given: which shape options the user gave. */
enum { GIVEN_HIDDEN = 1, GIVEN_FFN = 2, GIVEN_EXPERTS = 4, GIVEN_TOPK = 8, GIVEN_TOKENS = 16 };

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
    {"microbatches", required_argument, NULL, O_MICROBATCHES},
    {"preset", required_argument, NULL, O_PRESET},
    {"quantized-weights", required_argument, NULL, O_QWEIGHTS},
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
    "  --tokens N             tokens per microbatch (= per optimizer step with --microbatches 1),\n"
    "                         the global batch split across ranks (default 512)\n"
    "  --microbatches M       gradient accumulation (default 1): M microbatches of --tokens each,\n"
    "                         then one Adam step, as Megatron runs TE's is_first_microbatch: the\n"
    "                         first runs the expert layers with GLN_MICROBATCH_FIRST (its gradients\n"
    "                         overwrite main_grad), the others with NEXT (theirs add); every\n"
    "                         parameter's gradient (experts, router, embeddings, head) is summed\n"
    "                         over the M, each scaled by 1/M, so the step sees the mean.  The\n"
    "                         expert weights are a sharded (distributed) group, on one rank too,\n"
    "                         and the layer never caches a gathered copy: every microbatch gathers\n"
    "                         them again (FP8 bytes under --quantized-weights, else the working\n"
    "                         dtype, quantized in the layer).  The loss of a\n"
    "                         step is the mean over its microbatches; tokens/s counts all of them\n"
    "  --quantized-weights on|off  fp8-current, fp8-block, mxfp8 (default on): the expert weight\n"
    "                         shards are stored quantized, refreshed once per optimizer step\n"
    "                         after Adam, so every microbatch's forward and backward gather FP8\n"
    "                         and no weight is quantized inside a microbatch (the sharded group's\n"
    "                         quantized_shard; mxfp8 keeps a rowwise and a columnwise copy, for\n"
    "                         layers whose input width is a multiple of 128).  off: gather the\n"
    "                         working dtype and quantize it in every forward and backward.\n"
    "                         Other recipes: ignored\n"
    "  --preset NAME          the expert dimensions of a real MoE model, one MoE layer:\n"
    "                           mixtral   Mixtral-8x7B-like   H 4096, F 14336, E 8, top-2\n"
    "                           qwen3     Qwen3-30B-A3B-like  H 2048, F 768, E 128, top-8\n"
    "                           deepseek  DeepSeek-V3-like    H 7168, F 2048, E 64 (a slice of\n"
    "                                                         its 256), top-8\n"
    "                         each with --tokens 16384; --hidden, --ffn, --experts, --topk and\n"
    "                         --tokens given explicitly override it.  Sized for one GPU: on the\n"
    "                         CPU give a small --tokens (the weights alone are 0.6-2.8 G\n"
    "                         parameters, 16 bytes each with Adam)\n"
    "  --hidden N             model width H (default 64)\n"
    "  --ffn N                expert FFN width F (default 128)\n"
    "  --experts N            number of experts E (default 8)\n"
    "  --topk N               experts per token k (default 2)\n"
    "  --lr X                 Adam learning rate (default: lm 0.003, teacher 0.01)\n"
    "  --seed N               seed of the data and the student (default 1)\n"
    "  --data FILE            lm: the text to train on, a regular file (or a directory: its\n"
    "                         regular files, by name) of at most " LM_MAX_TEXT_HUMAN " in all (default:\n"
    "                         every regular file under " LM_DEFAULT_CORPUS ")\n"
    "  --context N            lm: bytes of context (default 8)\n"
    "  --batches N            teacher: size of the data set in optimizer steps' batches, cycled\n"
    "                         through (default 4; 0 = a fresh random batch every step)\n"
    "  --path split|grouped   grouped linear execution path (default: split on the CPU, grouped\n"
    "                         on CUDA, which needs it: the expert splits stay on the device)\n"
    "  --activation swiglu|gelu   (default swiglu: FC1 is H -> 2F; gelu: H -> F)\n"
    "  --backend cpu|cuda     (default cpu).  cuda: the model's whole step runs on the GPU (MoE\n"
    "                         kernels, grouped GEMMs with device splits, Adam), bitwise\n"
    "                         reproducible run to run; the first step is a warm-up, not timed\n"
    "                         (lm; teacher: its data and loss stay host loops).  Several ranks\n"
    "                         need --comm mpi; they may share one GPU\n"
    "  --graph                cuda, lm, one rank: capture one optimizer step (all its\n"
    "                         microbatches and Adam) in a CUDA graph and replay it\n"
    "  --sync-every N         cuda: read the losses back every N steps for the progress line\n"
    "                         (default 50); nothing else waits for the GPU inside a step\n"
    "  --comm nccl|self|mpi   cuda: the expert weights' sharded group communicates over NCCL\n"
    "                         (world size 1; the default when the library has NCCL), the\n"
    "                         in-process self communicator bound to the device context, or MPI\n"
    "                         on device memory: under mpirun every rank its own context, all\n"
    "                         on one GPU if need be (NCCL cannot put two ranks on one GPU);\n"
    "                         each collective synchronizes the stream.  One rank: as self\n"
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
    "                         (checked before training, and refused when it names --out's\n"
    "                         loss.csv, loss.png or loss.gp; on a write error neither it nor\n"
    "                         loss.csv is left behind)\n"
    "  -h, --help             this help\n"
    "\n"
    "exit status: 0 ok, 1 failure (library error, --expect-loss-drop not met), 2 usage error\n";

/* The preset's dimensions where the user gave none. */
static void apply_preset(train_opts_t *o) {
    const train_preset_t *p = o->preset;
    if (!p) return;
    if (!(o->given & GIVEN_HIDDEN)) o->hidden = p->hidden;
    if (!(o->given & GIVEN_FFN)) o->ffn = p->ffn;
    if (!(o->given & GIVEN_EXPERTS)) o->experts = p->experts;
    if (!(o->given & GIVEN_TOPK)) o->topk = p->topk;
    if (!(o->given & GIVEN_TOKENS)) o->tokens = p->tokens;
}

static int handle(int code, const char *arg, void *user) {
    train_opts_t *o = user;
    static const char *const paths[] = {"split", "grouped"}, *const acts[] = {"swiglu", "gelu"};
    static const char *const backends[] = {"cpu", "cuda"}, *const tasks[] = {"lm", "teacher"};
    static const char *const comms[] = {"nccl", "self", "mpi"};
    switch (code) {
    case O_RECIPES: return opt_recipes(CMD, arg, o->recipes, &o->nrec);
    case O_STEPS: return opt_i64(CMD, "steps", arg, 1, 1000000, &o->steps);
    case O_TOKENS: o->given |= GIVEN_TOKENS; return opt_i64(CMD, "tokens", arg, 1, 1 << 22, &o->tokens);
    case O_HIDDEN: o->given |= GIVEN_HIDDEN; return opt_i64(CMD, "hidden", arg, 1, 16384, &o->hidden);
    case O_FFN: o->given |= GIVEN_FFN; return opt_i64(CMD, "ffn", arg, 1, 65536, &o->ffn);
    case O_EXPERTS: o->given |= GIVEN_EXPERTS; return opt_i64(CMD, "experts", arg, 1, 1024, &o->experts);
    case O_TOPK: o->given |= GIVEN_TOPK; return opt_i64(CMD, "topk", arg, 1, 1024, &o->topk);
    case O_MICROBATCHES: return opt_i64(CMD, "microbatches", arg, 1, 4096, &o->microbatches);
    case O_PRESET: {
        static const char *names[NPRESETS];
        for (int i = 0; i < NPRESETS; i++) names[i] = presets[i].name;
        int which = 0;
        const int rc = opt_choice(CMD, "preset", arg, names, NPRESETS, &which);
        if (rc == CLI_OK) o->preset = &presets[which];
        return rc;
    }
    case O_LR: return opt_double(CMD, "lr", arg, 1e-9, 10.0, &o->lr);
    case O_SEED: return opt_i64(CMD, "seed", arg, 0, INT64_MAX, &o->seed);
    case O_PATH: o->path_given = 1; return opt_choice(CMD, "path", arg, paths, 2, &o->path);
    case O_GRAPH: o->graph = 1; return CLI_OK;
    case O_QWEIGHTS: {
        static const char *const onoff[] = {"off", "on"};
        return opt_choice(CMD, "quantized-weights", arg, onoff, 2, &o->quantized_weights);
    }
    case O_SYNC_EVERY: return opt_i64(CMD, "sync-every", arg, 1, INT64_MAX, &o->sync_every);
    case O_COMM: o->comm_given = 1; return opt_choice(CMD, "comm", arg, comms, 3, &o->comm);
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

int train_parse(int argc, char **argv, train_opts_t *o, int *help_shown) {
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
    o->microbatches = 1;
    o->quantized_weights = 1;
    o->plot = 1;
    o->out_dir = ".";
    int rc = opt_parse(CMD, argc, argv, longopts, help, handle, o, help_shown);
    if (rc != CLI_OK || *help_shown) return rc;
    if (o->steps == 0) o->steps = o->task == TRAIN_TASK_LM ? 400 : 150;
    if (o->lr == 0) o->lr = o->task == TRAIN_TASK_LM ? 0.003 : 0.01;
    apply_preset(o);
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
        if (o->path_given && o->path == 0)
            return opt_usage_error(CMD, "--backend cuda needs --path grouped (the expert splits are "
                                        "computed on the device)");
        o->path = 1;
        if (o->task == TRAIN_TASK_LM && o->tokens * o->context > TOP_EMBED_BWD_MAX_PAIRS)
            return opt_usage_error(CMD, "--backend cuda takes --tokens x --context up to %lld (the embedding "
                                        "backward's int32 indices), not %lld", (long long)TOP_EMBED_BWD_MAX_PAIRS,
                                   (long long)(o->tokens * o->context));
        if (ranks > 1 && o->comm != 2)
            return opt_usage_error(CMD, "several ranks on --backend cuda need --comm mpi (NCCL cannot run "
                                        "two ranks on one GPU; here it serves one rank)");
        if (ranks > 1 && !gln_mpi_available())
            return opt_usage_error(CMD, "--comm mpi on %d ranks needs a library built with MPI", ranks);
        if (o->graph && (o->task != TRAIN_TASK_LM || ranks > 1))
            return opt_usage_error(CMD, "--graph captures the step of --task lm on one rank (MPI "
                                        "collectives cannot be captured)");
        if (!gln_backend_available(GLN_BACKEND_CUDA))
            return opt_usage_error(CMD, "--backend cuda is not available (this build has no CUDA "
                                        "backend or no GPU is present)");
    }
    if (o->tokens % ranks != 0)
        return opt_usage_error(CMD, "--tokens %lld must be a multiple of the %d ranks",
                               (long long)o->tokens, ranks);
    return CLI_OK;
}
