/* The text of `grouplin train`'s byte-level language-model task (--task lm): the bytes of one
 * file (--data FILE) or, by default, of every regular file under LM_DEFAULT_CORPUS in name
 * order; the first 90% train, the last 10% validate.  A window is `context` bytes and the byte
 * after them (the target); training windows are drawn at random, validation windows are every
 * window that lies inside the validation bytes, in order. */
#ifndef GLN_TOOLS_LM_DATA_H
#define GLN_TOOLS_LM_DATA_H

#include <stdint.h>

/* Present on every Debian/Ubuntu machine (package base-files). */
#define LM_DEFAULT_CORPUS "/usr/share/common-licenses"

typedef struct lm_text {
    uint8_t *bytes;
    int64_t size;        /* all bytes */
    int64_t train;       /* bytes [0, train) train, [train, size) validate */
    int files;           /* how many files were read */
} lm_text_t;

/* The most text --data may hold (a file, or a directory's files together): it is read whole into
 * memory, so a device such as /dev/zero, or a file growing while it is read, stops here. */
#define LM_MAX_TEXT_BYTES ((int64_t)1 << 30)
#define LM_MAX_TEXT_HUMAN "1 GiB"

/* Read --data `path` (NULL: the default corpus): a regular file, or every regular file directly
 * under a directory, LM_MAX_TEXT_BYTES in all.  Anything else (a FIFO, a device, a socket) is
 * refused before it is read.  Returns CLI_OK, or CLI_FAIL with a message on stderr (every rank
 * that fails prints its own) naming the path and the --data option.  The text must hold at
 * least one training and one validation window for `context`. */
int lm_text_load(const char *path, int64_t context, lm_text_t *t);
void lm_text_free(lm_text_t *t);

/* Windows [first, first + count) of step `step`'s global batch: ctx [count, context] and
 * next [count].  One random stream per (step, window), so a rank's slice of the batch does not
 * depend on how many ranks there are. */
void lm_train_windows(const lm_text_t *t, int64_t context, uint64_t seed, int64_t step, int64_t first,
                      int64_t count, uint8_t *ctx, uint8_t *next);
/* The number of validation windows. */
int64_t lm_val_count(const lm_text_t *t, int64_t context);
/* Validation windows [first, first + count); indices past the last window repeat the last one
 * (the caller ignores them: they pad the final batch to the model's fixed size). */
void lm_val_windows(const lm_text_t *t, int64_t context, int64_t first, int64_t count, uint8_t *ctx,
                    uint8_t *next);

#endif
