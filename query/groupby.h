/* groupby.h - a merge's totals and timeline per group of label values: Pyroscope's
 * `groupBy`, Grafana's SelectSeries `group_by`, /api/v1/timeseries?group_by=.
 *
 * The groups are the distinct value tuples the labels take among the series the
 * query selects (catalog_groups; "" where a series lacks a label). Each group is the
 * query narrowed with name="value" (an empty value selects the series without the
 * label, as in PromQL) and merged for totals and timeline only, so every group's
 * numbers follow the same rules as the whole (gauges averaged per series, filters
 * applied). Groups are ranked by the sum of their timeline (what a chart shows; the
 * total without one), largest first, ties in catalog order; those past the limit are
 * summed into "other". */
#ifndef HEARTH_GROUPBY_H
#define HEARTH_GROUPBY_H

#include "query/catalog.h"
#include "query/merge.h"

/* The individual profile a timeline bucket is shown by (Grafana's exemplars). */
typedef struct {
    int set;             /* 0: the bucket has no profile */
    catalog_profile_t p; /* the bucket's profile with the largest total (the newest of equals) */
    labels_t labels;     /* its series' labels */
} exemplar_t;

typedef struct {
    const char *const *vals; /* width values, borrowed from the result's groups */
    merge_result_t m;        /* totals and timeline */
    exemplar_t *ex;          /* nex (m.nbuckets) of them after groupby_exemplars, else NULL */
    size_t nex;
} group_t;

typedef struct {
    char *const *names; /* the labels grouped by (borrowed from the caller) */
    size_t width;
    catalog_groups_t g;
    group_t *v; /* ranked; at most the limit */
    size_t n;
    size_t nother; /* groups past the limit */
    double *other; /* their summed timeline (nbuckets values), NULL when none */
    double other_total;
} grouped_t;

/* The most timeline points (groups x buckets) one group-by computes: every group's
 * timeline is held while they are ranked, whatever the limit. */
enum { GROUPBY_MAX_POINTS = 4000000 };

/* The most labels one group-by names (REST's group_by, Connect's groupBy): each adds a
 * dimension, and thousands of them make a small request answer hundreds of MB. */
enum { GROUPBY_MAX_LABELS = 8 };

/* Merges q's selection (its stacks are not wanted) by group of names[0..width), in
 * one pass over the selection (merge_run_split): each group's totals and timeline are
 * what q narrowed to its values would give. limit 0 keeps every group.
 * More than GROUPBY_MAX_POINTS or GROUPBY_MAX_LABELS is HR_EINVAL, before any group
 * is merged.
 * 0, or -1 with err; out is destroyed by grouped_destroy either way. */
int groupby_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width, size_t limit,
                grouped_t *out, hr_err_t *err);
/* Fills each kept group's ex: per bucket of its timeline, the profile with the
 * largest total among those the group selects in the bucket (totals from the block
 * footers: no stacks are read). A profile's total is its whole value, before any
 * stack filter of q. 0, or -1 with err. */
int groupby_exemplars(store_t *st, const merge_query_t *q, selector_t *sel, grouped_t *g, hr_err_t *err);
/* Calls fn for every profile (newest first) that a kept group of g selects in q's
 * range, with the group's index in g->v; totals from the block footers, as
 * catalog_profiles lists them. With spans, fn is called for every span of those
 * profiles instead, as catalog_spans lists them. 0, or -1 with err. */
typedef void (*groupby_profile_fn)(void *ctx, size_t group, const catalog_profile_t *p);
int groupby_profiles(store_t *st, const merge_query_t *q, selector_t *sel, const grouped_t *g, int spans,
                     groupby_profile_fn fn, void *ctx, hr_err_t *err);
/* Copies into each of ex[0..n) its profile's series labels. 0, or -1 with err. */
int groupby_label(store_t *st, const merge_query_t *q, selector_t *sel, exemplar_t *const *ex, size_t n, hr_err_t *err);
void grouped_destroy(grouped_t *g);

#endif
