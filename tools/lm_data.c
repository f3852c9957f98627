/* Loading and windowing the language-model text (see lm_data.h). */
#define _POSIX_C_SOURCE 200809L
#include "lm_data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "task.h"

/* The last LM_VAL_PERCENT of the bytes validate. */
enum { LM_VAL_PERCENT = 10 };

static int say(int rank0, const char *path, const char *why) {
    if (rank0)
        fprintf(stderr, "grouplin train: cannot read the text '%s': %s (pass a text file with --data FILE)\n",
                path, why);
    return CLI_FAIL;
}

/* Append the regular file `path` to t->bytes. */
static int append_file(const char *path, int rank0, lm_text_t *t) {
    FILE *f = fopen(path, "rb");
    if (!f) return say(rank0, path, strerror(errno));
    int rc = CLI_OK;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        uint8_t *p = realloc(t->bytes, (size_t)t->size + n);
        if (!p) {
            rc = say(rank0, path, "out of memory");
            break;
        }
        memcpy(p + t->size, buf, n);
        t->bytes = p;
        t->size += (int64_t)n;
    }
    if (rc == CLI_OK && ferror(f)) rc = say(rank0, path, strerror(errno));
    fclose(f);
    t->files++;
    return rc;
}

/* Byte order of names, not the locale's: the same concatenation everywhere. */
static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file directly under `dir`, by name.  Symbolic links are skipped (GPL -> GPL-3
 * under the default corpus), so no text is read twice. */
static int append_dir(const char *dir, int rank0, lm_text_t *t) {
    struct dirent **names = NULL;
    const int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) return say(rank0, dir, strerror(errno));
    int rc = CLI_OK;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (rc == CLI_OK && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) rc = append_file(path, rank0, t);
        free(names[i]);
    }
    free(names);
    return rc;
}

int lm_text_load(const char *path, int64_t context, int rank0, lm_text_t *t) {
    memset(t, 0, sizeof *t);
    const char *src = path ? path : LM_DEFAULT_CORPUS;
    struct stat sb;
    if (stat(src, &sb) != 0) return say(rank0, src, strerror(errno));
    int rc = S_ISDIR(sb.st_mode) ? append_dir(src, rank0, t) : append_file(src, rank0, t);
    if (rc != CLI_OK) {
        lm_text_free(t);
        return rc;
    }
    t->train = t->size - t->size * LM_VAL_PERCENT / 100;
    /* at least one window each side: context bytes plus a target */
    if (t->train <= context || t->size - t->train <= context) {
        if (rank0)
            fprintf(stderr, "grouplin train: the text '%s' has %lld bytes; --context %lld needs at least "
                            "%lld (%d%% of them validate)\n",
                    src, (long long)t->size, (long long)context,
                    (long long)((context + 1) * 100 / LM_VAL_PERCENT + 1), LM_VAL_PERCENT);
        lm_text_free(t);
        return CLI_FAIL;
    }
    return CLI_OK;
}

void lm_text_free(lm_text_t *t) {
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

/* The window whose target is byte `i`. */
static void window(const lm_text_t *t, int64_t context, int64_t i, uint8_t *ctx, uint8_t *next) {
    memcpy(ctx, t->bytes + i - context, (size_t)context);
    *next = t->bytes[i];
}

void lm_train_windows(const lm_text_t *t, int64_t context, uint64_t seed, int64_t step, int64_t first,
                      int64_t count, uint8_t *ctx, uint8_t *next) {
    const uint64_t targets = (uint64_t)(t->train - context); /* targets context .. train-1 */
    for (int64_t w = 0; w < count; w++) {
        tool_rng_t r = tool_rng_seed(seed ^ 0x7E47ull, (uint64_t)step * 0x100000001ull + (uint64_t)(first + w));
        const int64_t i = context + (int64_t)(tool_rng_u64(&r) % targets);
        window(t, context, i, ctx + w * context, next + w);
    }
}

int64_t lm_val_count(const lm_text_t *t, int64_t context) { return t->size - t->train - context; }

void lm_val_windows(const lm_text_t *t, int64_t context, int64_t first, int64_t count, uint8_t *ctx,
                    uint8_t *next) {
    const int64_t last = lm_val_count(t, context) - 1;
    for (int64_t w = 0; w < count; w++) {
        const int64_t j = first + w < last ? first + w : last;
        window(t, context, t->train + context + j, ctx + w * context, next + w);
    }
}
