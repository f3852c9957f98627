/* Reuse of large host blocks between allocations of one CPU context (see cpu_block_cache.h). */
#include "backend/cpu/cpu_block_cache.h"

#include <pthread.h>
#include <stdlib.h>

/* Live large blocks remembered (a block allocated while this is full is freed normally). */
#define LIVE_MAX 256
/* Freed blocks kept for reuse, and their total size. */
#define KEEP_MAX 32
#define KEEP_BYTES_MAX ((size_t)1 << 30)

typedef struct block {
    void *ptr;
    size_t bytes;
} block_t;

struct gln_cpu_block_cache {
    pthread_mutex_t lock;
    block_t live[LIVE_MAX];
    block_t kept[KEEP_MAX];
    int nlive, nkept;
    size_t kept_bytes;
};

gln_cpu_block_cache_t *gln_cpu_block_cache_create(void) {
    gln_cpu_block_cache_t *c = calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

void gln_cpu_block_cache_destroy(gln_cpu_block_cache_t *c) {
    if (!c) return;
    for (int i = 0; i < c->nkept; i++) free(c->kept[i].ptr);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void *gln_cpu_block_cache_take(gln_cpu_block_cache_t *c, size_t bytes) {
    if (!c || bytes < GLN_CPU_BLOCK_CACHE_MIN) return NULL;
    void *p = NULL;
    pthread_mutex_lock(&c->lock);
    /* Best fit among kept blocks no more than twice the request (bounds the waste). */
    int best = -1;
    for (int i = 0; i < c->nkept; i++)
        if (c->kept[i].bytes >= bytes && c->kept[i].bytes / 2 <= bytes &&
            (best < 0 || c->kept[i].bytes < c->kept[best].bytes))
            best = i;
    if (best >= 0 && c->nlive < LIVE_MAX) {
        block_t b = c->kept[best];
        c->kept[best] = c->kept[--c->nkept];
        c->kept_bytes -= b.bytes;
        c->live[c->nlive++] = b;
        p = b.ptr;
    }
    pthread_mutex_unlock(&c->lock);
    return p;
}

void gln_cpu_block_cache_note(gln_cpu_block_cache_t *c, void *ptr, size_t bytes) {
    if (!c || !ptr || bytes < GLN_CPU_BLOCK_CACHE_MIN) return;
    pthread_mutex_lock(&c->lock);
    /* An address seen before was released behind our back (not through the context): its
     * entry is stale, so it takes the new size. */
    int i = 0;
    while (i < c->nlive && c->live[i].ptr != ptr) i++;
    if (i < c->nlive) {
        c->live[i].bytes = bytes;
    } else if (c->nlive < LIVE_MAX) {
        block_t b = {ptr, bytes};
        c->live[c->nlive++] = b;
    }
    pthread_mutex_unlock(&c->lock);
}

int gln_cpu_block_cache_give(gln_cpu_block_cache_t *c, void *ptr) {
    if (!c || !ptr) return 0;
    int kept = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->nlive; i++) {
        if (c->live[i].ptr != ptr) continue;
        block_t b = c->live[i];
        c->live[i] = c->live[--c->nlive];
        if (c->nkept < KEEP_MAX && c->kept_bytes + b.bytes <= KEEP_BYTES_MAX) {
            c->kept[c->nkept++] = b;
            c->kept_bytes += b.bytes;
            kept = 1;
        }
        break;
    }
    pthread_mutex_unlock(&c->lock);
    return kept;
}
