/* A per-context cache of large freed host blocks, so that the buffers a layer step allocates
 * and frees (GEMM workspaces, quantized copies: megabytes each) come back without a fresh
 * mmap, page faults and page zeroing every time (measured: ~17% of a fwd+bwd step at
 * E8 M1024 K2048 N2048 in bf16).  Only blocks of GLN_CPU_BLOCK_CACHE_MIN bytes or more that
 * this context allocated are tracked (by address: a pointer it does not know is freed as
 * usual); at most 32 blocks and 1 GiB are kept, reused best-fit up to twice the request, and
 * everything is released when the context is destroyed. */
#ifndef GLN_BACKEND_CPU_BLOCK_CACHE_H
#define GLN_BACKEND_CPU_BLOCK_CACHE_H

#include <stddef.h>

#define GLN_CPU_BLOCK_CACHE_MIN ((size_t)1 << 20)

typedef struct gln_cpu_block_cache gln_cpu_block_cache_t;

/* NULL when out of memory (the context then works without a cache). */
gln_cpu_block_cache_t *gln_cpu_block_cache_create(void);
/* Frees the kept blocks (live ones belong to their users). */
void gln_cpu_block_cache_destroy(gln_cpu_block_cache_t *c);
/* A kept block of at least `bytes` (now live), or NULL. */
void *gln_cpu_block_cache_take(gln_cpu_block_cache_t *c, size_t bytes);
/* Remember a freshly allocated block as live. */
void gln_cpu_block_cache_note(gln_cpu_block_cache_t *c, void *ptr, size_t bytes);
/* 1 when ptr was a live block and is now kept (do not free it); 0: free it as usual. */
int gln_cpu_block_cache_give(gln_cpu_block_cache_t *c, void *ptr);

#endif
