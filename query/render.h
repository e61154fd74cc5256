/* render.h - the output formats of a merged profile.
 *
 * All renderers append to a buf_t and read a tree (tree.h) or the merge result
 * itself; none of them changes the merged data.
 *   flamegraph: Pyroscope's flamebearer JSON (levels of [x delta, total, self,
 *               name index], see README), with metadata and timeline
 *   top:        functions by self value, with totals counted once per stack
 *   folded:     `root;...;leaf value` lines
 *   dataframe:  the nested-set table Grafana's flame graph panel reads
 *   diff:       the "double" flamebearer of two merges
 *   pprof:      a gzipped profile.proto that go tool pprof opens
 *   timeseries: totals per step */
#ifndef HEARTH_RENDER_H
#define HEARTH_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "query/merge.h"
#include "query/tree.h"

#define RENDER_DEFAULT_MAX_NODES 8192

/* The flamebearer layout of a tree as numbers, for the JSON document and for the
 * Connect querier's FlameGraph message: levels[d].v holds 4 numbers per node (x
 * delta, total, self, name index), names[] borrows strings from the tree's symtab.
 * Trimming to max_nodes (0 = none) folds dropped subtrees into their parent's self. */
typedef struct {
    int64_t *v;
    size_t len;
} fb_level_t;

typedef struct {
    const char **names;
    size_t nnames;
    fb_level_t *levels;
    size_t nlevels;
    int64_t total, max_self;
} flamebearer_t;

int flamebearer_build(const tree_t *t, size_t max_nodes, flamebearer_t *fb);
void flamebearer_destroy(flamebearer_t *fb);

/* Writes the flamebearer document. max_nodes 0 = no trimming. */
int render_flamegraph(const tree_t *t, const merge_result_t *r, size_t max_nodes, buf_t *out);
/* Writes {"functions":[{"name","self","total"}...],"total":N,"unit":U,...}. */
int render_top(const tree_t *t, const merge_result_t *r, size_t limit, buf_t *out);
int render_folded(const tree_t *t, buf_t *out);
/* Grafana's flame graph data frame: {"fields":{"level","value","self","label"}},
 * rows in depth-first pre-order, unit ns/bytes/short. */
int render_dataframe(const tree_t *t, const merge_result_t *r, buf_t *out);
/* time_nanos and duration_nanos are the span of the merged profiles (r->first_ns,
 * r->end_ns), 0 for an empty merge. */
int render_pprof(const merge_result_t *r, buf_t *out, hr_err_t *err);
/* The same profile.proto, not gzipped (Connect's SelectMergeProfile reply). */
int render_pprof_raw(const merge_result_t *r, buf_t *out, hr_err_t *err);
void render_timeseries(const merge_result_t *r, buf_t *out);

/* Pyroscope's "double" flamebearer of two merges of the same profile type (see
 * diff.c); metadata comes from lm. */
int render_diff(const tree_t *left, const merge_result_t *lm, const tree_t *right, size_t max_nodes, buf_t *out);
/* Shared by the flame graph renderers: the metadata object for r, with format
 * "single" or "double". */
void render_metadata(const merge_result_t *r, const char *format, buf_t *out);

#endif
