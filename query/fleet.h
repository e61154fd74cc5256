/* fleet.h - the fleet function table: which functions cost the most, and where.
 *
 * Google-Wide Profiling's first question, "which functions cost the most across the
 * fleet", then "in which services" (or versions, pods): the top table of a selection
 * with each function's self and total split by the value tuples of some labels
 * (/api/v1/query?format=top&group_by=service_name). Groups are catalog_groups' (one
 * per distinct tuple, "" where a series lacks a label), so every selected series is
 * in exactly one and the groups sum to the whole. Each group is the query narrowed
 * to its values and merged as the top table merges (merge.h's `functions`: block
 * partitions covered by the range are read as their function tables), so a group's
 * numbers are exactly that narrowed query's top table. */
#ifndef HEARTH_FLEET_H
#define HEARTH_FLEET_H

#include "query/catalog.h"
#include "query/groupby.h"
#include "query/merge.h"

/* One function's value in one group. */
typedef struct {
    uint32_t name;  /* string id in fleet_t.names */
    uint32_t group; /* row of g */
    int64_t self, total;
} fleet_cell_t;

typedef struct {
    char *const *labels; /* grouped by (borrowed from the caller) */
    size_t width;
    catalog_groups_t g;
    symtab_t *names; /* the function names (strings only) */
    fleet_cell_t *cells;
    size_t ncells, cap;
    merge_result_t meta; /* type_id, type and gauge only (never destroyed) */
    int64_t total;       /* the sum of every group's top-table total */
    uint64_t profiles;
    size_t charged; /* bytes of cells and names taken from the query's budget */
} fleet_t;

/* Merges q's selection (sel, which is narrowed and restored in turn) once per group of
 * labels[0..width) and keeps every function's nonzero self and total per group. More
 * than GROUPBY_MAX_LABELS labels is HR_EINVAL. 0, or -1 with err; out is destroyed by
 * fleet_destroy either way. */
int fleet_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *labels, size_t width, fleet_t *out,
              hr_err_t *err);
/* {"functions":[{"name","self","total","groups":[{"labels":{..},"self","total"}..]}..],
 * (a group's labels as the time series' groups write them: one it lacks left out),
 * "groupBy":[..],"total","unit","profileType","aggregation","profiles"}: functions by
 * self, largest first (ties by name), at most limit (0: all); each function's groups
 * by self, then total, largest first. 0 or -1 (OOM). */
int fleet_render(const fleet_t *f, size_t limit, buf_t *out);
void fleet_destroy(fleet_t *f);

#endif
