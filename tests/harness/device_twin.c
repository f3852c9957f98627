/* Device twins (device_twin.h). */
#include "device_twin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

gln_twin_t gln_twin_new(gln_context_t *ctx, size_t bytes, unsigned poison, size_t skew) {
    gln_twin_t t = {NULL, NULL, NULL, bytes};
    t.h = malloc(bytes ? bytes : 1);
    memset(t.h, (int)poison, bytes);
    unsigned char *g = malloc(bytes + GLN_TWIN_GUARD);
    memset(g, (int)poison, bytes);
    memset(g + bytes, GLN_TWIN_GUARD_BYTE, GLN_TWIN_GUARD);
    CHECK_OK(gln_malloc(ctx, bytes + GLN_TWIN_GUARD + skew, &t.alloc));
    if (t.alloc) {
        t.d = (char *)t.alloc + skew;
        CHECK_OK(gln_memcpy(ctx, t.d, g, bytes + GLN_TWIN_GUARD, GLN_COPY_HOST_TO_BACKEND));
    }
    free(g);
    return t;
}

gln_twin_t gln_twin_input(gln_context_t *ctx, const void *h, size_t bytes, size_t skew) {
    gln_twin_t t = gln_twin_new(ctx, bytes, 0, skew);
    gln_twin_set(ctx, &t, h);
    return t;
}

void gln_twin_set(gln_context_t *ctx, gln_twin_t *t, const void *h) {
    memcpy(t->h, h, t->bytes);
    if (t->d && t->bytes) CHECK_OK(gln_memcpy(ctx, t->d, h, t->bytes, GLN_COPY_HOST_TO_BACKEND));
}

void gln_twin_repoison(gln_context_t *ctx, gln_twin_t *t, unsigned poison) {
    if (!t->h) return;
    unsigned char *g = malloc(t->bytes ? t->bytes : 1);
    memset(g, (int)poison, t->bytes);
    gln_twin_set(ctx, t, g);
    free(g);
}

gln_twin_t gln_twin_upload(gln_context_t *ctx, const void *init, size_t bytes) {
    return init ? gln_twin_input(ctx, init, bytes, 0) : gln_twin_new(ctx, bytes, 0xFFu, 0);
}

void *gln_twin_fetch(gln_context_t *ctx, const gln_twin_t *t, const char *what) {
    unsigned char *g = calloc(1, t->bytes + GLN_TWIN_GUARD);
    if (!t->d) return g;
    CHECK_OK(gln_memcpy(ctx, g, t->d, t->bytes + GLN_TWIN_GUARD, GLN_COPY_BACKEND_TO_HOST));
    for (size_t i = 0; i < GLN_TWIN_GUARD; i++)
        if (g[t->bytes + i] != GLN_TWIN_GUARD_BYTE) {
            CHECK_MSG(0, "%s: guard byte %zu after the buffer overwritten", what, i);
            break;
        }
    memset(g + t->bytes, 0, GLN_TWIN_GUARD);
    return g;
}

void gln_twin_expect(gln_context_t *ctx, const gln_twin_t *t, const void *want, const char *what) {
    void *h = gln_twin_fetch(ctx, t, what);
    gln_check_bitwise(what, h, want, t->bytes);
    free(h);
}

void gln_twin_free(gln_context_t *ctx, gln_twin_t *t) {
    if (t->alloc) CHECK_OK(gln_free(ctx, t->alloc));
    free(t->h);
    memset(t, 0, sizeof *t);
}

void gln_twin_check(gln_context_t *ctx, const gln_twin_t *t, size_t es, const char *what, const char *name,
                    gln_twin_describe_fn describe, const void *arg) {
    if (!t->d) return;
    if (es != 1 && es != 4) {
        CHECK_MSG(0, "%s %s: gln_twin_check compares 1- or 4-byte elements, not %zu", what, name, es);
        return;
    }
    unsigned char *g = malloc(t->bytes + GLN_TWIN_GUARD);
    CHECK_OK(gln_memcpy(ctx, g, t->d, t->bytes + GLN_TWIN_GUARD, GLN_COPY_BACKEND_TO_HOST));
    const size_t n = t->bytes / es;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(g + i * es, (const unsigned char *)t->h + i * es, es) != 0 && bad++ == 0) first = i;
    if (bad) {
        char loc[240] = "";
        if (describe) describe(arg, first, loc, sizeof loc);
        uint32_t got = 0, want = 0;
        memcpy(&got, g + first * es, es);
        memcpy(&want, (const unsigned char *)t->h + first * es, es);
        float fg, fw;
        memcpy(&fg, &got, 4), memcpy(&fw, &want, 4);
        if (es == 4)
            CHECK_MSG(0, "%s %s: %zu of %zu differ; first at [%zu] %s: got 0x%08x (%g) want 0x%08x (%g)", what, name,
                      bad, n, first, loc, got, (double)fg, want, (double)fw);
        else
            CHECK_MSG(0, "%s %s: %zu of %zu differ; first at [%zu] %s: got 0x%02x want 0x%02x", what, name, bad, n,
                      first, loc, got, want);
    }
    for (size_t i = 0; i < GLN_TWIN_GUARD; i++)
        if (g[t->bytes + i] != GLN_TWIN_GUARD_BYTE) {
            CHECK_MSG(0, "%s %s: guard byte %zu after the buffer overwritten", what, name, i);
            break;
        }
    free(g);
}
