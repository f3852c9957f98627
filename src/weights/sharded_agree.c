/* Sharded weight group: failing together (docs/distributed.md).  Every collective of the group
 * first joins one agreement (gln_sharded_agree, counted); a layer call plans the agreements its
 * hooks will join, so that a call failing before it joined them all joins the next one with its
 * failure and the other ranks, waiting there, fail too instead of entering a collective alone.
 * And the state guard every writer of the working shard runs first. */
#include <stdint.h>

#include "comm/comm.h"
#include "common/error.h"
#include "weights/sharded.h"

gln_status_t gln_sharded_require_no_prefetch(const char *fn, const gln_sharded_weights_t *sw) {
    GLN_REQUIRE(!sw->prefetched[0].base && !sw->prefetched[1].base, GLN_STATUS_INVALID_STATE,
                "%s: a prefetched gather still reads the working shard; materialize it first", fn);
    return GLN_STATUS_SUCCESS;
}

gln_status_t gln_sharded_agree(gln_sharded_weights_t *sw, const char *fn, gln_status_t local,
                               const gln_agree_t *shape) {
    sw->agreements++;
    return gln_comm_agree(sw->comm, fn, local, shape);
}

void gln_sharded_call_begin(gln_sharded_weights_t *sw, const char *fn) {
    if (!sw) return;
    sw->call_fn = fn;
    sw->call_start = sw->agreements;
    sw->call_planned = 1;
}

void gln_sharded_call_plan(gln_sharded_weights_t *sw, int more) {
    if (sw) sw->call_planned += more;
}

gln_status_t gln_sharded_call_end(gln_sharded_weights_t *sw, gln_status_t st) {
    if (!sw) return st;
    if (st != GLN_STATUS_SUCCESS && sw->agreements - sw->call_start < (uint64_t)sw->call_planned) {
        gln_agree_t none = {{0}, {0}};
        st = gln_sharded_agree(sw, sw->call_fn, st, &none); /* returns st with its message */
    }
    sw->call_fn = NULL;
    return st;
}
