/* The per-thread last-error message, status strings and the optional log callback. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>

#define GLN_ERROR_CAPACITY 1024

static _Thread_local char last_error[GLN_ERROR_CAPACITY];

/* The log callback is process-wide configuration, set once before use (not hot state). */
static gln_log_fn log_fn;
static void *log_user;

const char *gln_status_string(gln_status_t status) {
    switch (status) {
    case GLN_STATUS_SUCCESS: return "success";
    case GLN_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case GLN_STATUS_NOT_SUPPORTED: return "not supported";
    case GLN_STATUS_OUT_OF_MEMORY: return "out of memory";
    case GLN_STATUS_INVALID_STATE: return "invalid state";
    case GLN_STATUS_BACKEND_ERROR: return "backend error";
    case GLN_STATUS_COMM_ERROR: return "communication error";
    case GLN_STATUS_INTERNAL_ERROR: return "internal error";
    }
    return "unknown status";
}

const char *gln_last_error(void) { return last_error; }

void gln_clear_error(void) { last_error[0] = '\0'; }

void gln_set_log_callback(gln_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void gln_version(int *major, int *minor, int *patch) {
    if (major) *major = GLN_VERSION_MAJOR;
    if (minor) *minor = GLN_VERSION_MINOR;
    if (patch) *patch = GLN_VERSION_PATCH;
}

gln_status_t gln_fail(gln_status_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (log_fn) log_fn(GLN_LOG_ERROR, last_error, log_user);
    return status;
}

void gln_log(gln_log_level_t level, const char *fmt, ...) {
    if (!log_fn) return;
    char buf[GLN_ERROR_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_fn(level, buf, log_user);
}
