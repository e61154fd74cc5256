/* err.h - the one error convention of Hearth.
 *
 * A function that can fail returns 0 on success and -1 on failure, and fills an
 * hr_err_t supplied by the caller (which may be NULL when the caller does not care).
 * The code says which class of failure it was, so the HTTP layer can map it to a
 * status without string matching; the message says what was wrong, for humans. */
#ifndef HEARTH_ERR_H
#define HEARTH_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" { /* common/regex.cc is C++ */
#endif

typedef enum {
    HR_OK = 0,
    HR_EINVAL,    /* malformed request or parameter (HTTP 400) */
    HR_EUNPROC,   /* well-formed request whose payload cannot be decoded (422) */
    HR_ETOOBIG,   /* over a configured size limit (413) */
    HR_ENOTFOUND, /* no such resource (404) */
    HR_EIO,       /* storage failure: disk full, I/O error (503) */
    HR_ENOMEM,    /* allocation failed (500) */
    HR_EINTERNAL, /* a bug or broken invariant (500) */
    HR_ELIMIT,    /* a configured limit or rate refused the request (429) */
    HR_ETIMEOUT,  /* the work ran past its deadline, e.g. --query-timeout (504) */
    HR_EDENIED    /* the caller may not touch this resource, e.g. another tenant's (403) */
} hr_code_t;

/* A message holds what a person needs to act on, whole: a list of the accepted values
 * may run long, and one cut mid-word helps nobody. */
#define HR_MSG_MAX 1024

typedef struct {
    hr_code_t code;
    char msg[HR_MSG_MAX];
} hr_err_t;

/* Fills err (if not NULL) with code and a printf-formatted message; returns -1 so a
 * caller can write `return hr_fail(err, HR_EINVAL, "bad %s", x);`. */
int hr_fail(hr_err_t *err, hr_code_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The HTTP status that corresponds to a code, and back (for counting replies). */
int hr_http_status(hr_code_t code);
hr_code_t hr_code_of_status(int status);

#ifdef __cplusplus
}
#endif

#endif
