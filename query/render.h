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

/* Writes the flamebearer document. max_nodes 0 = no trimming. */
int render_flamegraph(const tree_t *t, const merge_result_t *r, size_t max_nodes, buf_t *out);
/* Writes {"functions":[{"name","self","total"}...],"total":N,"unit":U,...}. */
int render_top(const tree_t *t, const merge_result_t *r, size_t limit, buf_t *out);
int render_folded(const tree_t *t, buf_t *out);
/* Grafana's flame graph data frame: {"fields":{"level","value","self","label"}},
 * rows in depth-first pre-order, unit ns/bytes/short. */
int render_dataframe(const tree_t *t, const merge_result_t *r, buf_t *out);
int render_pprof(const merge_result_t *r, int64_t from, int64_t until, buf_t *out, hr_err_t *err);
void render_timeseries(const merge_result_t *r, buf_t *out);

/* Pyroscope's "double" flamebearer of two merges of the same profile type (see
 * diff.c); metadata comes from lm. */
int render_diff(const tree_t *left, const merge_result_t *lm, const tree_t *right, size_t max_nodes, buf_t *out);
/* Shared by the flame graph renderers: the metadata object for r, with format
 * "single" or "double". */
void render_metadata(const merge_result_t *r, const char *format, buf_t *out);

#endif
