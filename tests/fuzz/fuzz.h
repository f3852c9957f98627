/* Shared pieces of the libFuzzer harnesses (tests/fuzz/fuzz_<name>.c).
 *
 * Every harness decodes its input with the byte reader below, so every byte string is a valid
 * attempt: a read past the end yields zeros, and each choice is a byte (or word) reduced into
 * its range.  Sizes are capped so that one execution stays in the milliseconds.  A harness calls
 * only the public API (include/grouplin.h) on the CPU backend and checks what the header
 * promises; a broken promise calls fz_fail(), which aborts, so libFuzzer (or the replay driver,
 * tests/fuzz/replay.c) reports the input.
 *
 * "Wild" values (negative sizes, sizes whose products overflow, element counts past the
 * library's 2^56 limit) are drawn only where the call must refuse them before touching memory;
 * GLN_FUZZ_NO_WILD=1 in the environment turns them off (see tests/fuzz/README.md). */
#ifndef GLN_FUZZ_H
#define GLN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "grouplin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
    const uint8_t *p;
    size_t n, i;
    int wild;     /* wild sizes allowed for this run (GLN_FUZZ_NO_WILD unset) */
    int specials; /* this input may put NaN / Inf / huge values into tensors */
} fz_t;

/* A reader over one input; reads the first byte as the input's flags. */
fz_t fz_begin(const uint8_t *data, size_t size);
uint8_t fz_u8(fz_t *f);
uint32_t fz_u32(fz_t *f);
uint64_t fz_u64(fz_t *f);
int fz_bool(fz_t *f);
/* An integer in [lo, hi] (hi - lo < 2^32). */
int64_t fz_int(fz_t *f, int64_t lo, int64_t hi);
/* One of n choices. */
int fz_pick(fz_t *f, int n);
/* A size: usually in [0, max]; when wild values are allowed, sometimes one of them (negative,
 * 2^31, 2^62, INT64_MAX, ...).  *wild is set when the value is outside [0, max]. */
int64_t fz_size(fz_t *f, int64_t max, int *wild);
/* A float for tensor data: multiples of 1/16 in [-8, 8) (exact in every high-precision dtype),
 * or with f->specials sometimes 0, -0, NaN, ±Inf, ±65504, 1e30, denormals. */
float fz_value(fz_t *f);

/* The process-wide CPU context of the harness (created on first use: 1 thread). */
gln_context_t *fz_context(void);

/* Per-input memory: exact-size host buffers (so AddressSanitizer catches any overrun), freed
 * by fz_free_all() at the end of the input.  fz_alloc(0) returns NULL half of the time and a
 * 1-byte buffer otherwise (empty tensors may have either). */
void *fz_alloc(fz_t *f, size_t bytes);
void fz_free_all(void);

/* A high-precision tensor [rows, cols] of dtype, filled from the input. */
gln_tensor_t fz_tensor(fz_t *f, gln_dtype_t dtype, int64_t rows, int64_t cols);
/* The same, every element NaN (an output the call must overwrite) or 0xA5 bytes. */
gln_tensor_t fz_tensor_poisoned(fz_t *f, gln_dtype_t dtype, int64_t rows, int64_t cols);
/* Element i of a high-precision tensor's data as a float. */
float fz_load(const void *data, gln_dtype_t dtype, size_t i);
void fz_store(void *data, gln_dtype_t dtype, size_t i, float v);
/* 1 when every element of a high-precision buffer is finite. */
int fz_all_finite(const void *data, gln_dtype_t dtype, size_t count);
/* 1 when no element of a high-precision buffer is NaN. */
int fz_no_nan(const void *data, gln_dtype_t dtype, size_t count);

/* Report a broken promise and abort (the input is a finding). */
void fz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
#define FZ_ASSERT(cond, ...)               \
    do {                                   \
        if (!(cond)) fz_fail(__VA_ARGS__); \
    } while (0)
/* A failing status must be a known status with a non-empty gln_last_error(); returns st. */
gln_status_t fz_status(gln_status_t st, const char *call);
/* The call must have refused (any status but success). */
void fz_refused(gln_status_t st, const char *call, const char *why);

#endif
