/* Messages of failures inside a layer call.  The boundary checks (validate.c) name the public
 * call and the argument themselves; what can still fail later — memory, the backend, a
 * caller-written distributed-weights hook — is reported by the internal call that saw it
 * ("gln_gemm: ...", "cpu backend: ...").  The layer re-reports such a failure under its own
 * public call and the step it was in, so gln_last_error() always starts with the call the
 * caller made. */
#include <stdio.h>
#include <string.h>

#include "layer/layer.h"

gln_status_t gln_layer_step_failed(const char *fn, const char *step, gln_status_t st) {
    char detail[GLN_LAYER_MESSAGE_MAX];
    const char *e = gln_last_error();
    const size_t n = strlen(fn);
    if (strncmp(e, fn, n) == 0 && strncmp(e + n, ": ", 2) == 0) e += n + 2; /* said once is enough */
    snprintf(detail, sizeof detail, "%s", e[0] ? e : gln_status_string(st));
    return gln_fail(st, "%s: %s: %s", fn, step, detail);
}

void gln_dist_hook_snapshot(char before[GLN_LAYER_MESSAGE_MAX]) {
    snprintf(before, GLN_LAYER_MESSAGE_MAX, "%s", gln_last_error());
}

gln_status_t gln_dist_hook_result(const char *hook, int32_t expert, const char *before, gln_status_t st) {
    if (st == GLN_STATUS_SUCCESS) return st;
    char detail[GLN_LAYER_MESSAGE_MAX], which[48] = "";
    const char *e = gln_last_error();
    /* a message older than the hook is not the hook's: a caller-written hook cannot record
     * one, it only can by calling the library */
    snprintf(detail, sizeof detail, "%s", e[0] && strcmp(e, before) != 0 ? e : "the hook left no message");
    if (expert >= 0) snprintf(which, sizeof which, " for expert %d", (int)expert);
    return gln_fail(st, "cfg->params.distributed->%s%s failed (%s): %s", hook, which, gln_status_string(st),
                    detail);
}
