/*
 * ctrial/error.h — status codes and the thread-local error message.
 *
 * Every fallible call that returns a status returns 0 on success and a
 * negative CT_E* code on failure. Calls that return a pointer (tensor ops,
 * constructors) return NULL on failure. Either way, ct_last_error() then holds
 * a message written for a person: what failed and why (the op, the shapes,
 * the file and key...). The message is thread-local and owned by the library;
 * it stays until the next failure on the same thread or ct_clear_error().
 *
 *     ct_tensor *y = ct_matmul(a, b);
 *     if (!y) {
 *         fprintf(stderr, "%s: %s\n", ct_strerror(ct_last_code()), ct_last_error());
 *         return 1;
 *     }
 *
 * Tensor ops propagate failure: given a NULL input they return NULL and keep
 * the first error's message, so a chain of ops (a forward pass) needs one
 * check at its end.
 */
#ifndef CTRIAL_ERROR_H
#define CTRIAL_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CT_API __declspec(dllexport)
#else
#define CT_API __attribute__((visibility("default")))
#endif

/* The codes, one row each: XX(name, value, short phrase, meaning). This table
 * is the only list: it makes the enum below, ct_err_name() and ct_strerror(),
 * and tools/check_layers.py checks docs/api/error.md's table against it. A
 * new code is one new row (libuv's UV_ERRNO_MAP). */
#define CT_ERRNO_MAP(XX)                                                                       \
    XX(OK, 0, "success", "success")                                                            \
    XX(EINVAL, -1, "invalid argument", "invalid argument: NULL, out of range, bad option")     \
    XX(ESHAPE, -2, "shape mismatch", "shapes do not match or do not fit the operation")        \
    XX(EDTYPE, -3, "wrong dtype", "wrong or unsupported dtype")                                \
    XX(EDEVICE, -4, "wrong or unavailable device", "wrong, mixed or unavailable device")       \
    XX(EINDEX, -5, "index out of range", "index out of range")                                 \
    XX(ENOMEM, -6, "out of memory", "out of host or device memory")                            \
    XX(ENOTSUP, -7, "not supported", "not supported by this build or this object")            \
    XX(EIO, -8, "input/output error", "reading or writing a file failed")                      \
    XX(EFORMAT, -9, "malformed input", "malformed input: file, checkpoint, config")            \
    XX(ESTATE, -10, "object in the wrong state", "object in the wrong state: freed, closed, unset") \
    XX(ETORCH, -11, "libtorch error", "any other error reported by libtorch")                  \
    XX(ECONFIG, -12, "bad configuration", "bad configuration value or unknown key")            \
    XX(ETRIAL, -13, "trial callback failed", "a user callback reported failure")               \
    XX(EDIST, -14, "distributed failure", "distributed: a rank failed or disagrees")           \
    XX(ECHECKPOINT, -15, "bad checkpoint", "a checkpoint is missing, corrupt or does not fit") \
    XX(ENAN, -16, "loss is not finite", "the loss became NaN or infinite")                     \
    XX(EEXIT, -17, "the trial asked to exit", "the trial asked to end (ct_ctx_should_exit): not a failure") \
    XX(ENOENT, -18, "no such object", "no such object in a store (an S3 key), or file")

enum {
#define CT_ERRNO_ENUM_(name, value, phrase, meaning) CT_##name = value,
    CT_ERRNO_MAP(CT_ERRNO_ENUM_)
#undef CT_ERRNO_ENUM_
};

/* The code's constant name ("CT_ESHAPE"), or "CT_UNKNOWN" for a number
 * that is not a code; never NULL. Static string. */
CT_API const char *ct_err_name(int code);

/* The code's name and a short phrase ("CT_ESHAPE: shape mismatch"), or
 * "unknown ctrial error code"; never NULL. Static string. */
CT_API const char *ct_strerror(int code);

/* Message of the last failure on this thread, "" if none. Borrowed: valid
 * until the next failure or ct_clear_error() on this thread. */
CT_API const char *ct_last_error(void);

/* Code of the last failure on this thread, CT_OK if none. */
CT_API int ct_last_code(void);

/* Forgets the last failure on this thread. ctrial calls it before every
 * call into code of yours (the trial's functions, callbacks, datasets,
 * collate functions, reducers), so an error your program handled earlier
 * never reads as a failure of that code: a function whose NULL means
 * "nothing" (a callback's state_dict, evaluation_reducer) means it unless
 * it set an error (docs/api/error.md, "Errors and your code"). */
CT_API void ct_clear_error(void);

/* Records a failure (for user callbacks and library layers): sets the code and
 * a printf-style message and returns the code, so `return ct_set_error(...)`
 * reads naturally. */
CT_API int ct_set_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
