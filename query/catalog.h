/* catalog.h - what is stored: series, profile types, label names and values, and
 * which series a selector selects.
 *
 * Backs the discovery endpoints (series, profile types, labels, label values,
 * group-by series) and the series selection of every merge. Discovery questions are
 * answered here as sorted arrays, once for REST, Pyroscope's routes and Connect
 * alike, so the handlers only encode them and cannot disagree about a value.
 *
 * Without a time range every series of the tenant counts; with one, only series that
 * have a profile in the range (found by scanning profile rows, not samples). The
 * single-profile list reads the same rows.
 *
 * Selectors are matched on a snapshot of the tenant's series (index_snapshot), with
 * no lock held: a regex is linear in the label value but not free, and a query over
 * many series must not hold the index mutex every ingest needs. The deadline is
 * checked per series and per scanned segment, so discovery stops at --query-timeout
 * as merges do. */
#ifndef HEARTH_CATALOG_H
#define HEARTH_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "common/ptype.h"
#include "query/selector.h"
#include "storage/store.h"

typedef struct {
    const char *tenant;
    const selector_t *sel; /* NULL: every series */
    int ranged;            /* only series with a profile in [from, until] (ns, inclusive) */
    int64_t from, until;
    int64_t deadline_ns; /* wall clock (time_now_ns); past it HR_ETIMEOUT; 0 = none */
} catalog_query_t;

/* Called for each selected series, with no lock held. */
typedef void (*catalog_series_fn)(void *ctx, const series_t *s);

/* Calls fn for each series q selects, by ascending id. 0, or -1 with err set
 * (HR_ETIMEOUT past the deadline, HR_ENOMEM); fn may have been called before. */
int catalog_series(store_t *st, const catalog_query_t *q, catalog_series_fn fn, void *ctx, hr_err_t *err);

/* The series q selects as a bitmap, one byte per series id; malloc'd, caller frees;
 * *n receives its length. Series created meanwhile are not in it. NULL with err set
 * on failure, as catalog_series. Merges leave q->ranged 0: their scan reads the
 * time range anyway. */
uint8_t *catalog_select(store_t *st, const catalog_query_t *q, uint32_t *n, hr_err_t *err);

/* One stored profile: its series, time and total value; or, from catalog_spans, one
 * span's part of it. */
typedef struct {
    uint32_t series;
    int64_t time_ns, total;      /* total: of the span's samples when span is set */
    uint64_t span;               /* 0: the whole profile */
    uint64_t trace_hi, trace_lo; /* the span's trace id when known (0, 0: not) */
} catalog_profile_t;

/* Keeps y's trace id in x when x has none (two listings of one span). */
static inline void catalog_keep_trace(catalog_profile_t *x, const catalog_profile_t *y) {
    if (!(x->trace_hi | x->trace_lo)) x->trace_hi = y->trace_hi, x->trace_lo = y->trace_lo;
}

/* Lists the profiles of the series selected by q->sel (which must name a profile
 * type) in [q->from, q->until], newest first. *out is malloc'd (caller frees), *n
 * its length. Profiles of one series at the same instant are listed once, summed,
 * as a merge would see them. */
int catalog_profiles(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err);
/* As catalog_profiles, but one entry per span id each profile's samples carry (a
 * trace-to-profile link, segment.h), with the sum of that span's samples; profiles
 * without span samples are not listed. Newest first, then by series and span. It
 * reads the span samples, so it decodes the selected series' partitions. */
int catalog_spans(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err);

/* ---- discovery answers: sorted arrays ----
 * Each function answers for the series any of q[0..nq) selects (nq >= 1, all of one
 * tenant: Connect's matchers are one query each, REST asks one), sorted and without
 * duplicates. An answer is one allocation: free(out->v) releases all of it, also
 * after a failure (v is then NULL). On success v is never NULL, even when n is 0.
 * 0, or -1 with err set as catalog_series (HR_ETIMEOUT, HR_ENOMEM). */

typedef struct {
    const char **v;
    size_t n;
} catalog_strings_t;

/* With CATALOG_PSEUDO_LABELS, label names also list __name__ and __profile_type__
 * whenever a series is selected, as Connect's LabelNames does; REST's and
 * Pyroscope's label lists name stored labels only. */
#define CATALOG_PSEUDO_LABELS 1u

/* The label names of the selected series; flags 0 or CATALOG_PSEUDO_LABELS. */
int catalog_label_names(store_t *st, const catalog_query_t *q, size_t nq, unsigned flags, catalog_strings_t *out,
                        hr_err_t *err);
/* The values label `name` has among the selected series, as catalog_label_value
 * gives them (pseudo-labels included). */
int catalog_label_values(store_t *st, const catalog_query_t *q, size_t nq, const char *name, catalog_strings_t *out,
                         hr_err_t *err);
/* The Pyroscope 0.x application names (catalog_app_name) of the selected series. */
int catalog_app_names(store_t *st, const catalog_query_t *q, size_t nq, catalog_strings_t *out, hr_err_t *err);

typedef struct {
    const char *id;
    ptype_parts_t parts;
} catalog_type_t;

typedef struct {
    catalog_type_t *v; /* by id */
    size_t n;
} catalog_types_t;

/* The profile types of the selected series with their parts (an id without five
 * parts is left out). */
int catalog_profile_types(store_t *st, const catalog_query_t *q, size_t nq, catalog_types_t *out, hr_err_t *err);

/* One label set: n pairs, kv[2i] the name and kv[2i + 1] the value. */
typedef struct {
    const char **kv;
    size_t n;
} catalog_label_set_t;

typedef struct {
    catalog_label_set_t *v; /* sorted pair by pair */
    size_t n;
} catalog_label_sets_t;

/* Connect's Series: the distinct label sets of the selected series, each __name__,
 * __profile_type__, then the series' labels by name, keeping only the names in
 * names[0..nnames) when nnames is not 0 (a set may then be empty). */
int catalog_label_sets(store_t *st, const catalog_query_t *q, size_t nq, char *const *names, size_t nnames,
                       catalog_label_sets_t *out, hr_err_t *err);

/* The groups of a group-by over the stored labels names[0..width): row i is
 * v[i * width .. i * width + width), one value per name, "" where a series lacks the
 * label; rows distinct and sorted. Without names, one empty row when any series is
 * selected. */
typedef struct {
    const char **v;
    size_t n, width;
} catalog_groups_t;

int catalog_groups(store_t *st, const catalog_query_t *q, size_t nq, char *const *names, size_t width,
                   catalog_groups_t *out, hr_err_t *err);

/* The value of label `name` of series s as every API answers it, REST and Connect
 * alike: the series label, or for the pseudo-labels __profile_type__ the type id
 * and __name__ the type's name part (process_cpu, memory, ...), the same values a
 * `__name__` matcher compares (selector_label). buf holds a computed value. */
const char *catalog_label_value(const series_t *s, const char *name, char *buf, size_t n);

/* Pyroscope 0.x's application name of s: service_name plus the short name of its
 * type (`shop.cpu`, `shop.alloc_space`), as its /label-values?label=__name__ listed
 * them and its clients query them; NULL when s has no service_name or its type no
 * short name. */
const char *catalog_app_name(const series_t *s, char *buf, size_t n);

/* Settles the profile type of sel from what is stored, so Pyroscope's short names
 * mean the types an application actually has:
 *  - a legacy `app.SHORT` (sel->short_type) becomes the best-fitting type among
 *    the series its matchers select (ptype_short_rank; over all time); when
 *    nothing is stored for them, the short name's usual id stays; when something
 *    is stored but nothing fits, or several fit equally, HR_EINVAL lists them;
 *  - a selector without a type, when need_type (merges), is HR_EINVAL listing the
 *    types its series have.
 * Only q->tenant and q->deadline_ns are read from q. 0 or -1 (err set). */
int catalog_resolve_type(store_t *st, const catalog_query_t *q, selector_t *sel, int need_type, hr_err_t *err);

#endif
