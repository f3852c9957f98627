/* Loading and windowing the language-model text (see lm_data.h). */
#define _POSIX_C_SOURCE 200809L
#include "lm_data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "launch.h"
#include "task.h"

/* The last LM_VAL_PERCENT of the bytes validate. */
enum { LM_VAL_PERCENT = 10 };

static const char *const CMD = "train";

static int say(const char *path, const char *why) {
    tool_error(CMD, "cannot read the text '%s': %s (pass a text file with --data FILE)", path, why);
    return CLI_FAIL;
}

/* bytes: the text's size, or -1 when it is only known to pass the limit (it grew while read). */
static int too_big(const char *path, int64_t bytes) {
    char size[64] = "";
    if (bytes >= 0) snprintf(size, sizeof size, "%lld bytes, ", (long long)bytes);
    tool_error(CMD, "cannot read the text '%s': %smore than --data's limit of %lld bytes (%s)", path, size,
               (long long)LM_MAX_TEXT_BYTES, LM_MAX_TEXT_HUMAN);
    return CLI_FAIL;
}

/* A FIFO would block the read until a writer came, a device such as /dev/zero would never end. */
static int check_regular(const char *path, const struct stat *sb) {
    if (S_ISREG(sb->st_mode)) return CLI_OK;
    const char *kind = S_ISFIFO(sb->st_mode)  ? "a FIFO"
                       : S_ISCHR(sb->st_mode) ? "a character device"
                       : S_ISBLK(sb->st_mode) ? "a block device"
                       : S_ISSOCK(sb->st_mode) ? "a socket"
                                               : "not a regular file";
    tool_error(CMD, "cannot read the text '%s': it is %s; --data takes a regular file (or a directory of them)",
               path, kind);
    return CLI_FAIL;
}

/* Read fd to its end onto t->bytes, holding the whole text to LM_MAX_TEXT_BYTES (a file that
 * grows while it is read is cut off there and refused).  `expect`: its size when opened. */
static int read_all(int fd, const char *path, int64_t expect, lm_text_t *t) {
    int64_t cap = t->size + expect + 1; /* one spare byte: the read that sees the end */
    uint8_t *p = realloc(t->bytes, (size_t)cap);
    if (!p) return say(path, "out of memory");
    t->bytes = p;
    for (;;) {
        if (t->size == cap) {
            if (cap > LM_MAX_TEXT_BYTES) return too_big(path, -1);
            cap = cap * 2 < LM_MAX_TEXT_BYTES + 1 ? cap * 2 : LM_MAX_TEXT_BYTES + 1;
            if (!(p = realloc(t->bytes, (size_t)cap))) return say(path, "out of memory");
            t->bytes = p;
        }
        const ssize_t n = read(fd, t->bytes + t->size, (size_t)(cap - t->size));
        if (n == 0) return CLI_OK;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return say(path, strerror(errno));
        t->size += n;
        if (t->size > LM_MAX_TEXT_BYTES) return too_big(path, -1);
    }
}

/* Append the regular file `path` to t->bytes.  O_NONBLOCK: a FIFO put in its place after the
 * caller looked does not block the open (fstat then refuses it). */
static int append_file(const char *path, lm_text_t *t) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return say(path, strerror(errno));
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 ? check_regular(path, &sb) : say(path, strerror(errno));
    if (rc == CLI_OK && sb.st_size > LM_MAX_TEXT_BYTES - t->size) rc = too_big(path, t->size + sb.st_size);
    if (rc == CLI_OK) rc = read_all(fd, path, sb.st_size, t);
    close(fd);
    t->files++;
    return rc;
}

/* Byte order of names, not the locale's: the same concatenation everywhere. */
static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file directly under `dir`, by name.  Symbolic links are skipped (GPL -> GPL-3
 * under the default corpus), so no text is read twice; so are FIFOs and devices. */
static int append_dir(const char *dir, lm_text_t *t) {
    struct dirent **names = NULL;
    const int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) return say(dir, strerror(errno));
    int rc = CLI_OK;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (rc == CLI_OK && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) rc = append_file(path, t);
        free(names[i]);
    }
    free(names);
    return rc;
}

int lm_text_load(const char *path, int64_t context, lm_text_t *t) {
    memset(t, 0, sizeof *t);
    const char *src = path ? path : LM_DEFAULT_CORPUS;
    struct stat sb;
    if (stat(src, &sb) != 0) return say(src, strerror(errno));
    int rc = S_ISDIR(sb.st_mode) ? append_dir(src, t) : append_file(src, t);
    if (rc != CLI_OK) {
        lm_text_free(t);
        return rc;
    }
    t->train = t->size - t->size * LM_VAL_PERCENT / 100;
    /* at least one window each side: context bytes plus a target */
    if (t->train <= context || t->size - t->train <= context) {
        tool_error(CMD, "the text '%s' has %lld bytes; --context %lld needs at least %lld (%d%% of them validate)",
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
