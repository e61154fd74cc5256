/* regex.cc - see regex.h. The only C++ in Hearth: RE2 has no C API, so this file
 * keeps C++ (and its exceptions) from crossing into the C code: every entry point
 * catches everything RE2 or the allocator may throw. */
#include "common/regex.h"

#include <re2/re2.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

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

static hr_regex_t *compile(const char *pattern, size_t n, bool capture, hr_err_t *err) {
    re2::RE2::Options o;
    o.set_dot_nl(true);            /* Prometheus's (?s): `.` matches a newline too */
    o.set_never_capture(!capture); /* for matching, groups only group: no submatches reported */
    o.set_log_errors(false);       /* refusals go to the client, not to stderr */
    o.set_max_mem(HR_REGEX_MAX_MEM);
    hr_regex_t *r = new hr_regex(pattern, n, o);
    if (r->re.ok()) return r;
    hr_fail(err, HR_EINVAL, "%s%s", r->re.error().c_str(), hint(r->re));
    delete r;
    return nullptr;
}

static hr_regex_t *compile_checked(const char *pattern, bool capture, hr_err_t *err) {
    size_t n = std::strlen(pattern);
    if (n > HR_REGEX_MAX_LEN) {
        hr_fail(err, HR_EINVAL, "the pattern is %zu bytes long, over the limit of %d", n, HR_REGEX_MAX_LEN);
        return nullptr;
    }
    try {
        return compile(pattern, n, capture, err);
    } catch (const std::bad_alloc &) {
        hr_fail(err, HR_ENOMEM, "out of memory compiling a regular expression");
    } catch (...) {
        hr_fail(err, HR_EINTERNAL, "regular expression compiler failed");
    }
    return nullptr;
}

extern "C" hr_regex_t *hr_regex_compile(const char *pattern, hr_err_t *err) {
    return compile_checked(pattern, false, err);
}

extern "C" hr_regex_t *hr_regex_compile_groups(const char *pattern, hr_err_t *err) {
    return compile_checked(pattern, true, err);
}

/* Go's regexp.Expand: $N, ${N}, $name, ${name} (a name of letters, digits and `_`)
 * become that group's text, empty when there is no such group or it did not take
 * part; $$ is a `$`. */
static void expand(const re2::RE2 &re, const re2::StringPiece *groups, int ngroups, const char *t, std::string &out) {
    const auto &named = re.NamedCapturingGroups();
    for (const char *p = t; *p;) {
        if (*p != '$') {
            out += *p++;
            continue;
        }
        p++;
        if (*p == '$') {
            out += '$', p++;
            continue;
        }
        bool brace = *p == '{';
        const char *name = brace ? p + 1 : p, *e = name;
        while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '_') e++;
        if (e == name || (brace && *e != '}')) { /* not a reference: kept as written */
            out += '$';
            continue;
        }
        std::string key(name, (size_t)(e - name));
        int idx = -1;
        if (key.find_first_not_of("0123456789") == std::string::npos) idx = key.size() < 9 ? std::stoi(key) : -1;
        else if (named.count(key)) idx = named.at(key);
        if (idx >= 0 && idx < ngroups && groups[idx].data()) out.append(groups[idx].data(), groups[idx].size());
        p = brace ? e + 1 : e;
    }
}

extern "C" char *hr_regex_expand(const hr_regex_t *re, const char *s, size_t n, const char *tmpl) {
    try {
        int ngroups = re->re.NumberOfCapturingGroups() + 1;
        std::vector<re2::StringPiece> groups((size_t)ngroups);
        if (!re->re.Match(re2::StringPiece(s, n), 0, n, re2::RE2::ANCHOR_BOTH, groups.data(), ngroups)) return nullptr;
        std::string out;
        expand(re->re, groups.data(), ngroups, tmpl, out);
        char *c = (char *)std::malloc(out.size() + 1);
        if (c) std::memcpy(c, out.c_str(), out.size() + 1);
        return c;
    } catch (...) {
        return nullptr;
    }
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
