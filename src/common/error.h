/* Error reporting used by every layer of the library.
 *
 * Public entry points validate their arguments once, at the boundary, and report failures with
 * gln_fail(), which records "<call>: <detail>" as this thread's last error and returns the
 * status.  Internal helpers propagate statuses with GLN_TRY (return) or GLN_CHECK (goto fail),
 * so every error path unwinds through one cleanup label. */
#ifndef GLN_COMMON_ERROR_H
#define GLN_COMMON_ERROR_H

#include "grouplin.h"

#if defined(__GNUC__)
#define GLN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GLN_PRINTF(a, b)
#endif

/* Record a failure (message formatted like printf) and return `status`. */
gln_status_t gln_fail(gln_status_t status, const char *fmt, ...) GLN_PRINTF(2, 3);
/* Emit a message through the log callback, if one is set. */
void gln_log(gln_log_level_t level, const char *fmt, ...) GLN_PRINTF(2, 3);

/* Return `status` with a message when `cond` does not hold. */
#define GLN_REQUIRE(cond, status, ...)                                                          \
    do {                                                                                        \
        if (!(cond)) return gln_fail((status), __VA_ARGS__);                                    \
    } while (0)
#define GLN_REQUIRE_ARG(cond, ...) GLN_REQUIRE(cond, GLN_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define GLN_REQUIRE_NOT_NULL(fn, ptr)                                                           \
    GLN_REQUIRE_ARG((ptr) != NULL, "%s: %s must not be NULL", (fn), #ptr)

/* Propagate a failing status to the caller. */
#define GLN_TRY(expr)                                                                           \
    do {                                                                                        \
        gln_status_t gln_try_status_ = (expr);                                                  \
        if (gln_try_status_ != GLN_STATUS_SUCCESS) return gln_try_status_;                      \
    } while (0)

/* Store a failing status of `expr` in the status variable `st` and jump to `label` (the
 * function's cleanup): GLN_CHECK(st, fail, gln_ctx_alloc(ctx, bytes, &p)). */
#define GLN_CHECK(st, label, expr)                                                              \
    do {                                                                                        \
        (st) = (expr);                                                                          \
        if ((st) != GLN_STATUS_SUCCESS) goto label;                                             \
    } while (0)
/* Like GLN_CHECK for a condition: when it does not hold, record the message, store `status`
 * in `st` and jump to `label`. */
#define GLN_CHECK_COND(st, label, cond, status, ...)                                            \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            (st) = gln_fail((status), __VA_ARGS__);                                             \
            goto label;                                                                         \
        }                                                                                       \
    } while (0)

#endif
