/* The delayed-wgrad FIFO (TE's delay_wgrad_compute).  With delay_wgrad_compute, each backward
 * computes dgrad and dbias and queues one item holding the wgrad operands (owned by the item,
 * so the saved context may be released first), the output views and the accumulate flag.
 * gln_grouped_linear_backward_dw runs the oldest item; destroy frees items never run. */
#include <stdlib.h>

#include "layer/layer.h"

void gln_wgrad_queue_push(gln_grouped_linear_t *L, gln_wgrad_item_t *item) {
    item->next = NULL;
    if (L->queue_tail)
        L->queue_tail->next = item;
    else
        L->queue_head = item;
    L->queue_tail = item;
}

void gln_wgrad_item_free(gln_context_t *ctx, gln_wgrad_item_t *item) {
    if (!item) return;
    gln_group_buffer_free(ctx, &item->x);
    gln_group_buffer_free(ctx, &item->dy);
    gln_ctx_free(ctx, item->splits_dev);
    free(item->splits_host);
    free(item->d);
    free(item);
}

void gln_wgrad_queue_clear(gln_grouped_linear_t *L) {
    while (L->queue_head) {
        gln_wgrad_item_t *it = L->queue_head;
        L->queue_head = it->next;
        gln_wgrad_item_free(L->ctx, it);
    }
    L->queue_tail = NULL;
}

gln_status_t gln_grouped_linear_backward_dw(gln_grouped_linear_t *layer) {
    static const char *fn = "gln_grouped_linear_backward_dw";
    GLN_REQUIRE_NOT_NULL(fn, layer);
    GLN_REQUIRE(layer->queue_head != NULL, GLN_STATUS_INVALID_STATE,
                "%s: the delayed wgrad queue is empty (each backward of a layer created with "
                "delay_wgrad_compute = 1 queues one item)", fn);
    gln_wgrad_item_t *it = layer->queue_head;
    layer->queue_head = it->next;
    if (!layer->queue_head) layer->queue_tail = NULL;
    gln_status_t st = gln_stage_wgrad(layer, &it->x, &it->dy, it->d, it->accumulate);
    if (st != GLN_STATUS_SUCCESS) st = gln_layer_step_failed(fn, "wgrad GEMM", st);
    gln_wgrad_item_free(layer->ctx, it);
    return st;
}
