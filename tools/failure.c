/* The program's own failures (see cli.h): its buffers, recorded beside the library's last
 * error so that a failed setup always prints what could not be done. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static char detail[256];

void *tool_alloc(size_t count, size_t size, const char *what) {
    void *p = count && size ? calloc(count, size) : calloc(1, 1);
    if (p) return p;
    if (size && count > SIZE_MAX / size)
        snprintf(detail, sizeof detail, "cannot allocate %zu x %zu bytes for %s (more than SIZE_MAX)",
                 count, size, what);
    else
        snprintf(detail, sizeof detail, "cannot allocate %zu bytes of host memory for %s",
                 count * size, what);
    return NULL;
}

gln_status_t tool_oom(size_t bytes, const char *what) {
    snprintf(detail, sizeof detail, "cannot allocate %zu bytes of host memory for %s", bytes, what);
    return GLN_STATUS_OUT_OF_MEMORY;
}

gln_status_t tool_fail(gln_status_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return status;
}

const char *tool_last_error(void) { return detail[0] ? detail : gln_last_error(); }
