/* tests/errors/errors_util.h — checks for calls that must fail cleanly.
 * Include after defining _POSIX_C_SOURCE (fork/waitpid). */
#ifndef ERRORS_UTIL_H
#define ERRORS_UTIL_H

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ct_test.h"

/* The op returned NULL and the error is `code` with a message holding both
 * needles (the second may be NULL). */
#define CHECK_NULL_ERR(expr, code, needle, needle2)                                  \
    do {                                                                             \
        ct_clear_error();                                                            \
        const void *r_ = (expr);                                                     \
        CHECK(r_ == NULL);                                                           \
        CHECK_MSG(needle2);                                                          \
        CHECK_ERR(code, needle);                                                     \
    } while (0)

/* The status call returned `code` (negative) with a message holding needle. */
#define CHECK_RC_ERR(expr, code, needle)                                             \
    do {                                                                             \
        ct_clear_error();                                                            \
        int rc_ = (expr);                                                            \
        CHECK(rc_ == (code));                                                        \
        CHECK_ERR(code, needle);                                                     \
    } while (0)

/* The last error's message contains needle (the code is checked elsewhere). */
static inline void check_msg(const char *needle, const char *file, int line) {
    ct_test_checks++;
    if (needle && !strstr(ct_last_error(), needle)) {
        ct_test_failures++;
        fprintf(stderr, "%s:%d: message \"%s\" does not mention \"%s\"\n", file, line,
                ct_last_error(), needle);
    }
}
#define CHECK_MSG(needle) check_msg((needle), __FILE__, __LINE__)

/* The op returned NULL with some error code whose message holds needle: for
 * failures whose exact code is libtorch's business. */
#define CHECK_NULL_FAILS(expr, needle)                                               \
    do {                                                                             \
        ct_clear_error();                                                            \
        const void *r_ = (expr);                                                     \
        CHECK(r_ == NULL);                                                           \
        CHECK(ct_last_code() < 0);                                                   \
        CHECK_MSG(needle);                                                           \
        ct_clear_error();                                                            \
    } while (0)

#define CHECK_RC_FAILS(expr, needle)                                                 \
    do {                                                                             \
        ct_clear_error();                                                            \
        int rc_ = (expr);                                                            \
        CHECK(rc_ < 0 && rc_ == ct_last_code());                                     \
        CHECK_MSG(needle);                                                           \
        ct_clear_error();                                                            \
    } while (0)

/* Runs fn in a child process: 0 when it returned normally, otherwise its exit
 * status or 128 + the signal that killed it. For calls that might crash. */
static inline int run_in_child(void (*fn)(void)) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        ct_test_failures = 0; /* count the child's own failures only */
        fn();
        fflush(stdout);
        fflush(stderr);
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs checks in a child process and counts a failure if the child failed
 * a check or crashed. For values that are UB in C++ (an enum value outside
 * its enumerators): a sanitizer aborts the child, not the whole test. */
#define CHECK_IN_CHILD(fn)                                                           \
    do {                                                                             \
        int rc_ = run_in_child(fn);                                                  \
        if (rc_ != 0) fprintf(stderr, "%s:%d: %s: child exited with %d\n", __FILE__, \
                              __LINE__, #fn, rc_);                                   \
        CHECK(rc_ == 0);                                                             \
    } while (0)
#define CHILD_DONE() exit(ct_test_failures ? 1 : 0)

#endif
