/* The per-thread last-error message, status strings and the optional log callback. */
#define _POSIX_C_SOURCE 200809L /* pthread_rwlock_t under -std=c11 */
#include "common/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define GLN_ERROR_CAPACITY 1024

static _Thread_local char last_error[GLN_ERROR_CAPACITY];

/* The log callback: process-wide, and it may be changed at any time, also while other threads'
 * calls are failing.  A message copies the (fn, user) pair under `log_mutex` and counts itself in
 * `log_readers` while the callback runs; the setter waits until no callback is running, and
 * while it waits new messages wait for it (no starvation).  So every message sees a matching
 * pair, and once gln_set_log_callback returns the previous callback is running nowhere and is
 * never called again (its `user` may be freed).  `log_on` lets the common case, no callback,
 * skip the lock.  A callback that calls into the library again re-enters with the pair its
 * thread already holds; one that calls gln_set_log_callback would wait for itself, so that change
 * is kept and applied when the outermost callback on its thread returns. */
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_cond = PTHREAD_COND_INITIALIZER;
static gln_log_fn log_fn;
static void *log_user;
static int log_readers; /* callbacks running now */
static int log_writers; /* setters waiting for them */
static atomic_int log_on;
static _Thread_local int log_depth;          /* callbacks running on this thread */
static _Thread_local gln_log_fn held_fn;     /* the pair they run with */
static _Thread_local void *held_user;
static _Thread_local int log_pending;        /* a change asked for from inside a callback */
static _Thread_local gln_log_fn pending_fn;
static _Thread_local void *pending_user;

static void log_apply(gln_log_fn fn, void *user) {
    pthread_mutex_lock(&log_mutex);
    log_writers++;
    while (log_readers > 0) pthread_cond_wait(&log_cond, &log_mutex);
    log_writers--;
    log_fn = fn;
    log_user = user;
    atomic_store_explicit(&log_on, fn != NULL, memory_order_release);
    pthread_cond_broadcast(&log_cond);
    pthread_mutex_unlock(&log_mutex);
}

static void log_emit(gln_log_level_t level, const char *message) {
    if (!atomic_load_explicit(&log_on, memory_order_acquire)) return;
    if (log_depth > 0) { /* from inside a callback: this thread already counts as a reader */
        log_depth++;
        if (held_fn) held_fn(level, message, held_user);
        log_depth--;
        return;
    }
    pthread_mutex_lock(&log_mutex);
    while (log_writers > 0) pthread_cond_wait(&log_cond, &log_mutex);
    held_fn = log_fn;
    held_user = log_user;
    if (held_fn) log_readers++;
    pthread_mutex_unlock(&log_mutex);
    if (!held_fn) return;
    log_depth++;
    held_fn(level, message, held_user);
    log_depth--;
    held_fn = NULL;
    held_user = NULL;
    pthread_mutex_lock(&log_mutex);
    if (--log_readers == 0) pthread_cond_broadcast(&log_cond);
    pthread_mutex_unlock(&log_mutex);
    if (log_pending) {
        log_pending = 0;
        log_apply(pending_fn, pending_user);
    }
}

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
    if (log_depth > 0) {
        log_pending = 1;
        pending_fn = fn;
        pending_user = user;
        return;
    }
    log_apply(fn, user);
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
    if (atomic_load_explicit(&log_on, memory_order_acquire)) {
        /* A copy: a callback that fails a call itself overwrites last_error, not its message. */
        char message[GLN_ERROR_CAPACITY];
        memcpy(message, last_error, sizeof message);
        log_emit(GLN_LOG_ERROR, message);
    }
    return status;
}

void gln_log(gln_log_level_t level, const char *fmt, ...) {
    if (!atomic_load_explicit(&log_on, memory_order_acquire)) return;
    char buf[GLN_ERROR_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_emit(level, buf);
}
