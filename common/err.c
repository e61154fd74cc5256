/* err.c - see err.h. */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>

int hr_fail(hr_err_t *err, hr_code_t code, const char *fmt, ...) {
    if (!err) return -1;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int hr_http_status(hr_code_t code) {
    switch (code) {
    case HR_OK: return 200;
    case HR_EINVAL: return 400;
    case HR_EUNPROC: return 422;
    case HR_ETOOBIG: return 413;
    case HR_ENOTFOUND: return 404;
    case HR_EIO: return 503;
    case HR_ENOMEM:
    case HR_EINTERNAL: return 500;
    case HR_ELIMIT: return 429;
    case HR_ETIMEOUT: return 504;
    case HR_EDENIED: return 403;
    }
    return 500;
}

hr_code_t hr_code_of_status(int status) {
    switch (status) {
    case 400: return HR_EINVAL;
    case 413: return HR_ETOOBIG;
    case 404: return HR_ENOTFOUND;
    case 422: return HR_EUNPROC;
    case 503: return HR_EIO;
    case 429: return HR_ELIMIT;
    case 504: return HR_ETIMEOUT;
    case 403: return HR_EDENIED;
    default: return status < 400 ? HR_OK : HR_EINTERNAL;
    }
}
