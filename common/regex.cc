/* regex.cc - see regex.h. The only C++ in Hearth: RE2 has no C API, so this file
 * keeps C++ (and its exceptions) from crossing into the C code: every entry point
 * catches everything RE2 or the allocator may throw. */
#include "common/regex.h"

#include <re2/re2.h>

#include <cstring>
#include <new>
#include <string>

struct hr_regex {
    re2::RE2 re;
    hr_regex(const char *pattern, size_t n, const re2::RE2::Options &o) : re(re2::StringPiece(pattern, n), o) {}
};

/* RE2's message names the offending piece; the hint says what Hearth's limit is. */
static const char *hint(const re2::RE2 &re) {
    switch (re.error_code()) {
    case re2::RE2::ErrorRepeatSize:
        return " (a repetition count may be at most 1000, counts of nested repetitions multiplied)";
    case re2::RE2::ErrorPatternTooLarge:
        return " (the compiled pattern would exceed the memory limit of one regex; use fewer or smaller "
               "repetitions)";
    case re2::RE2::ErrorBadEscape:
        return re.error_arg().size() == 2 && re.error_arg()[1] >= '0' && re.error_arg()[1] <= '9'
                   ? " (backreferences are not supported: RE2/Go syntax, as in Prometheus)"
                   : "";
    default: return "";
    }
}

static hr_regex_t *compile(const char *pattern, size_t n, hr_err_t *err) {
    re2::RE2::Options o;
    o.set_dot_nl(true);        /* Prometheus's (?s): `.` matches a newline too */
    o.set_never_capture(true); /* groups only group: matching never reports submatches */
    o.set_log_errors(false);   /* refusals go to the client, not to stderr */
    o.set_max_mem(HR_REGEX_MAX_MEM);
    hr_regex_t *r = new hr_regex(pattern, n, o);
    if (r->re.ok()) return r;
    hr_fail(err, HR_EINVAL, "%s%s", r->re.error().c_str(), hint(r->re));
    delete r;
    return nullptr;
}

extern "C" hr_regex_t *hr_regex_compile(const char *pattern, hr_err_t *err) {
    size_t n = std::strlen(pattern);
    if (n > HR_REGEX_MAX_LEN) {
        hr_fail(err, HR_EINVAL, "the pattern is %zu bytes long, over the limit of %d", n, HR_REGEX_MAX_LEN);
        return nullptr;
    }
    try {
        return compile(pattern, n, err);
    } catch (const std::bad_alloc &) {
        hr_fail(err, HR_ENOMEM, "out of memory compiling a regular expression");
    } catch (...) {
        hr_fail(err, HR_EINTERNAL, "regular expression compiler failed");
    }
    return nullptr;
}

extern "C" int hr_regex_match(const hr_regex_t *re, const char *s, size_t n) {
    try {
        return re->re.Match(re2::StringPiece(s, n), 0, n, re2::RE2::ANCHOR_BOTH, nullptr, 0) ? 1 : 0;
    } catch (...) {
        return 0; /* only allocation can throw here, and RE2 caps what it allocates */
    }
}

extern "C" int hr_regex_search(const hr_regex_t *re, const char *s, size_t n) {
    try {
        return re->re.Match(re2::StringPiece(s, n), 0, n, re2::RE2::UNANCHORED, nullptr, 0) ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

extern "C" void hr_regex_free(hr_regex_t *re) { delete re; }
