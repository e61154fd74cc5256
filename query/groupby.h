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

typedef struct {
    const char *const *vals; /* width values, borrowed from the result's groups */
    merge_result_t m;        /* totals and timeline */
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

/* Runs q (its stacks are not wanted) once per group of names[0..width). q->sel is
 * borrowed mutable: narrowed per group and restored. limit 0 keeps every group.
 * 0, or -1 with err; out is destroyed by grouped_destroy either way. */
int groupby_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width, size_t limit,
                grouped_t *out, hr_err_t *err);
void grouped_destroy(grouped_t *g);

#endif
