/* regex.h - label regexes with Prometheus semantics and bounded cost.
 *
 * Selectors come from URLs and request bodies, so a regex is untrusted input that
 * runs while other tenants wait. glibc's POSIX regcomp expands bounded repetitions
 * into automata that grew to 24 GB for `a{0,32767}`, and its backreferences make
 * matching exponential. This module wraps RE2 (common/regex.cc, C++ behind a C API):
 * the syntax is RE2's, which is Go's and so Prometheus's; compiling is refused past a
 * fixed memory budget instead of growing; matching is linear in the input and
 * thread-safe on one compiled regex.
 *
 * Semantics are PromQL's: a pattern matches the whole value, as Prometheus's
 * `^(?s:` + re + `)$`, and `.` matches a newline. The pattern is parsed on its
 * own, so it cannot close the anchoring group (`a)|(b` is a syntax error). */
#ifndef HEARTH_REGEX_H
#define HEARTH_REGEX_H

#include <stddef.h>

#include "common/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest pattern accepted, in bytes: room for a Grafana multi-value variable
 * (`svc1|svc2|...` over a few hundred values), and a bound on parse memory, which
 * RE2's compile budget does not cover. */
#define HR_REGEX_MAX_LEN 16384
/* RE2's budget for one compiled regex: its programs and the DFA caches matching
 * fills. A pattern whose program does not fit is refused (HR_EINVAL); a DFA that
 * fills its share is flushed, or matching falls back to RE2's NFA, still linear. */
#define HR_REGEX_MAX_MEM (4 << 20)

typedef struct hr_regex hr_regex_t;

/* Compiles pattern (NUL-terminated). Returns the regex (free with hr_regex_free), or
 * NULL with err filled: HR_EINVAL for a pattern RE2 refuses (bad syntax, a
 * repetition count over 1000, a program over HR_REGEX_MAX_MEM, a backreference,
 * a pattern over HR_REGEX_MAX_LEN), HR_ENOMEM when allocation failed. err->msg
 * says which, for the client. */
hr_regex_t *hr_regex_compile(const char *pattern, hr_err_t *err);

/* The same, keeping its groups for hr_regex_expand (relabeling's `regex`). */
hr_regex_t *hr_regex_compile_groups(const char *pattern, hr_err_t *err);

/* When the n bytes at s match the whole pattern (compiled with
 * hr_regex_compile_groups), tmpl with its group references expanded as Go's
 * regexp.Expand does ($1, ${1}, $name, ${name}; $$ for a `$`; a group that does not
 * exist or did not match expands to nothing), as a malloc'd string; NULL when s does
 * not match or memory ran out. */
char *hr_regex_expand(const hr_regex_t *re, const char *s, size_t n, const char *tmpl);

/* 1 when the n bytes at s match the whole pattern, else 0. s need not be
 * NUL-terminated. Safe to call from several threads on one regex. */
int hr_regex_match(const hr_regex_t *re, const char *s, size_t n);

/* 1 when the pattern matches somewhere in the n bytes at s (Go's MatchString, as
 * pprof's -focus/-ignore/-hide use it), else 0. Same compiled regex, same costs. */
int hr_regex_search(const hr_regex_t *re, const char *s, size_t n);

/* Frees re; NULL is fine. */
void hr_regex_free(hr_regex_t *re);

#ifdef __cplusplus
}
#endif

#endif
