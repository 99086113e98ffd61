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

enum {
    CT_OK = 0,
    CT_EINVAL = -1,   /* invalid argument: NULL, out of range, bad option   */
    CT_ESHAPE = -2,   /* shapes do not match or do not fit the operation    */
    CT_EDTYPE = -3,   /* wrong or unsupported dtype                         */
    CT_EDEVICE = -4,  /* wrong, mixed or unavailable device                 */
    CT_EINDEX = -5,   /* index out of range                                 */
    CT_ENOMEM = -6,   /* out of host or device memory                       */
    CT_ENOTSUP = -7,  /* not supported by this build or this object         */
    CT_EIO = -8,      /* reading or writing a file failed                   */
    CT_EFORMAT = -9,  /* malformed input: file, checkpoint, config          */
    CT_ESTATE = -10,  /* object in the wrong state: freed, closed, unset    */
    CT_ETORCH = -11,  /* any other error reported by libtorch               */
    CT_ECONFIG = -12, /* bad configuration value or unknown key             */
    CT_ETRIAL = -13,  /* a user callback reported failure                   */
    CT_EDIST = -14,   /* distributed: a rank failed or disagrees            */
    CT_ECHECKPOINT = -15, /* a checkpoint is missing, corrupt or does not fit */
    CT_ENAN = -16,    /* the loss became NaN or infinite                    */
    CT_EEXIT = -17,   /* the trial asked to end (ct_ctx_should_exit): not a failure */
};

/* Short constant name of a code ("CT_ESHAPE: shape mismatch"); never NULL. */
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
