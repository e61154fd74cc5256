/* catalog.h - what is stored: series, profile types, label names and values, and
 * which series a selector selects.
 *
 * Backs the discovery endpoints (series, profile types, labels, label values) and
 * the series selection of every merge. Without a time range every series of the
 * tenant counts; with one, only series that have a profile in the range (found by
 * scanning profile rows, not samples). The single-profile list reads the same rows.
 *
 * Selectors are matched on a snapshot of the tenant's series (index_snapshot), with
 * no lock held: a regex is linear in the label value but not free, and a query over
 * many series must not hold the index mutex every ingest needs. The deadline is
 * checked per series and per scanned segment, so discovery stops at --query-timeout
 * as merges do. */
#ifndef HEARTH_CATALOG_H
#define HEARTH_CATALOG_H

#include <stdint.h>

#include "query/selector.h"
#include "storage/store.h"

typedef struct {
    const char *tenant;
    const selector_t *sel; /* NULL: every series */
    int ranged;            /* only series with a profile in [from, until] (ns, inclusive) */
    int64_t from, until;
    int64_t deadline_ns;   /* wall clock (time_now_ns); past it HR_ETIMEOUT; 0 = none */
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

/* One stored profile: its series, time and total value. */
typedef struct {
    uint32_t series;
    int64_t time_ns, total;
} catalog_profile_t;

/* Lists the profiles of the series selected by q->sel (which must name a profile
 * type) in [q->from, q->until], newest first. *out is malloc'd (caller frees), *n
 * its length. Profiles of one series at the same instant are listed once, summed,
 * as a merge would see them. */
int catalog_profiles(store_t *st, const catalog_query_t *q, catalog_profile_t **out, size_t *n, hr_err_t *err);

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
