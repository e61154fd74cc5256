/* selector.h - series selectors, as in Parca and Prometheus:
 *
 *   PROFILE_TYPE{label="v", label!="v", label=~"re", label!~"re"}
 *
 * PROFILE_TYPE is a full type id (process_cpu:cpu:nanoseconds:cpu:nanoseconds) and
 * may be omitted (`{service_name="api"}`). For Pyroscope compatibility a legacy
 * `app.cpu{...}` is read as service_name="app" plus the short type name `cpu`
 * (ptype.h), which catalog_resolve_type turns into the type the app stores.
 * Regexes are RE2's syntax (Go's, so PromQL's) with PromQL's semantics: anchored at
 * both ends, `.` matching a newline (common/regex.h). A regex is compiled once, by
 * selector_parse, within a fixed memory budget; one that RE2 refuses (bad syntax,
 * a repetition count over 1000, a backreference, too large a program) fails the
 * parse with HR_EINVAL, so the client gets a 400. Matching is linear in the label
 * value. Values are PromQL string literals, decoded as Prometheus decodes them:
 * "..." and '...' with Go's escapes (\n \t \\ \xNN \NNN \uNNNN \UNNNNNNNN and
 * the quote itself; any other escape, such as a regex's `\d`, is a 400: write
 * "\\d"), `...` raw with no escapes; or, as in Pyroscope names, bare. The
 * pseudo-labels __profile_type__ and __name__ match the type id and its first
 * part (process_cpu, memory, ...). */
#ifndef HEARTH_SELECTOR_H
#define HEARTH_SELECTOR_H

#include <stddef.h>

#include "common/err.h"
#include "common/regex.h"
#include "common/labels.h"

typedef enum { MATCH_EQ, MATCH_NEQ, MATCH_RE, MATCH_NRE } match_op_t;

typedef struct {
    char *name, *value;
    match_op_t op;
    hr_regex_t *re; /* compiled value of =~ and !~; NULL for the others */
} matcher_t;

typedef struct {
    char *profile_type; /* NULL when the selector names none */
    char *short_type;   /* the short name of a legacy `app.cpu`, else NULL (ptype.h) */
    matcher_t *m;
    size_t n, cap;
} selector_t;

/* Parses s into out (which the caller destroys, also after a failure). */
int selector_parse(const char *s, selector_t *out, hr_err_t *err);
void selector_destroy(selector_t *sel);
/* Narrows sel with name="value" (copied); 0 or -1 (OOM). */
int selector_add_eq(selector_t *sel, const char *name, const char *value, hr_err_t *err);
/* Drops the matchers past the first n (undoing selector_add_eq). */
void selector_truncate(selector_t *sel, size_t n);
/* The value a matcher on `name` compares: the series label, or for the pseudo-labels
 * __profile_type__ the type id and __name__ its first part (written into buf).
 * NULL when the series has no such label. */
const char *selector_label(const char *ptype, const labels_t *labels, const char *name, char *buf, size_t n);
/* 1 when a series of this type and labels is selected. */
int selector_matches(const selector_t *sel, const char *profile_type, const labels_t *labels);

#endif
