/* Device twins: a host copy and a device copy (on a given context) of the same bytes, for tests
 * that run one computation on the CPU backend (into the host copy) and on a device backend (into
 * the device copy) and compare the two bit for bit.
 *
 * The device copy is followed by GLN_TWIN_GUARD bytes of GLN_TWIN_GUARD_BYTE that must survive;
 * it may start `skew` bytes into its allocation (misaligned buffers).  Both copies are poisoned
 * alike.  Every helper takes the device context; failures are recorded with CHECK_OK / CHECK_MSG
 * and the twin is left usable (d == NULL when the allocation failed: checks are then skipped). */
#ifndef GLN_TEST_DEVICE_TWIN_H
#define GLN_TEST_DEVICE_TWIN_H

#include <stddef.h>

#include "grouplin.h"

#define GLN_TWIN_GUARD 64
#define GLN_TWIN_GUARD_BYTE 0x5Au

typedef struct gln_twin {
    void *h, *d; /* h: bytes (never NULL once made); d: bytes + GLN_TWIN_GUARD, `skew` into alloc */
    void *alloc;
    size_t bytes;
} gln_twin_t;

/* Both copies filled with the byte `poison`; the guard after the device copy. */
gln_twin_t gln_twin_new(gln_context_t *ctx, size_t bytes, unsigned poison, size_t skew);
/* Both copies holding `h` (inputs, initial state). */
gln_twin_t gln_twin_input(gln_context_t *ctx, const void *h, size_t bytes, size_t skew);
/* Overwrite both copies with `h` (t->bytes of it); the guard is left as it is. */
void gln_twin_set(gln_context_t *ctx, gln_twin_t *t, const void *h);
/* Fill both copies with the byte `poison` again (no-op on a zeroed twin). */
void gln_twin_repoison(gln_context_t *ctx, gln_twin_t *t, unsigned poison);
/* Release both copies and zero *t (safe on a zeroed twin). */
void gln_twin_free(gln_context_t *ctx, gln_twin_t *t);

/* A twin for a test that reads the device bytes back itself: both copies holding `init`, or the
 * byte 0xFF when init is NULL (NaN in fp32 / bf16 / fp16 and E4M3 / E5M2), no skew. */
gln_twin_t gln_twin_upload(gln_context_t *ctx, const void *init, size_t bytes);
/* The device copy's bytes in a fresh host buffer (free() it; zeros when t->d is NULL), reporting
 * "<what>: guard byte <i> after the buffer overwritten" when the guard did not survive. */
void *gln_twin_fetch(gln_context_t *ctx, const gln_twin_t *t, const char *what);

/* The device copy's bytes equal `want` (t->bytes of it) bit for bit, and its guard survived. */
void gln_twin_expect(gln_context_t *ctx, const gln_twin_t *t, const void *want, const char *what);

/* Writes the location of element `index` ("member 2 row 5 col 7") into out[n]. */
typedef void (*gln_twin_describe_fn)(const void *arg, size_t index, char *out, size_t n);

/* The device copy equals the host copy, compared as elements of `es` bytes (1 or 4).  On a
 * mismatch reports "<what> <name>: <count> of <n> differ; first at [i] <location>: got .. want .."
 * (4-byte elements also as floats), the location from describe(arg, i) when describe is given;
 * separately reports the first damaged guard byte.  Does nothing when t->d is NULL. */
void gln_twin_check(gln_context_t *ctx, const gln_twin_t *t, size_t es, const char *what, const char *name,
                    gln_twin_describe_fn describe, const void *arg);

#endif
