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
 *   lines:      one function's self and total by source line (pprof -list's numbers)
 *   sandwich:   one function's callers and callees, two flame graphs (pprof -peek's numbers)
 *   svg:        the flame graph as a self-contained SVG image
 *   timeseries: totals per step
 *
 * The handlers reach them through one table (render.c): a row names the format,
 * its content type, what the merge must hold for it (stacks, a timeline, a call
 * tree) and the function; query_render runs a row. A new format is one file with
 * its render_fn plus one row (CONTRIBUTING.md). The direct functions further down
 * stay for the unit tests and the Connect querier, which encodes protobuf itself. */
#ifndef HEARTH_RENDER_H
#define HEARTH_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "query/groupby.h"
#include "query/merge.h"
#include "query/tree.h"

#define RENDER_DEFAULT_MAX_NODES 8192

/* ---- the renderer table ---- */

/* Where a renderer is offered: how many merges it reads and with what. */
typedef enum {
    RENDER_MERGE,  /* one merge with stacks: /api/v1/query?format=NAME */
    RENDER_DIFF,   /* two merges of one profile type, left and right (/api/v1/diff) */
    RENDER_TOTALS, /* one merge of totals, no stacks (/api/v1/timeseries) */
} render_kind_t;

/* What a merge must hold for a renderer (renderer_t.needs). */
#define RENDER_STACKS 1u    /* merge_query_t.want_stacks */
#define RENDER_TIMELINE 2u  /* a merge_query_t.step: Pyroscope's timeline, the time series */
#define RENDER_TREE 4u      /* the call tree of each merge, which query_render builds */
#define RENDER_FUNCTIONS 8u /* per-function sums suffice: merge_query_t.functions */

/* Where a source view gets a file's text: fetch fills out with source file path of
 * binary build_id ("" when unknown) and returns where it came from ("source-dir",
 * "debuginfod"), or NULL with why[cap] saying why there is none. */
typedef struct {
    const char *(*fetch)(void *ctx, const char *build_id, const char *path, buf_t *out, char *why, size_t cap);
    void *ctx;
} source_fetch_t;

/* The caller's side of a render: its merges and options. */
typedef struct {
    merge_result_t *m;            /* the merge; for RENDER_DIFF the left side */
    merge_result_t *right;        /* RENDER_DIFF only: the right side */
    size_t max_nodes;             /* flame graphs: 0 = no trimming */
    size_t limit;                 /* top: rows, 0 = all */
    const char *function;         /* lines, sandwich: the function (a frame name); NULL for the others */
    const grouped_t *groups;      /* flamegraph, timeseries: per-group timelines to add; NULL: none */
    const source_fetch_t *source; /* source: where files come from; NULL: nowhere */
} render_args_t;

/* What a renderer reads: the caller's arguments and, when its row needs
 * RENDER_TREE, the trees query_render built (right_tree for RENDER_DIFF). */
typedef struct {
    const render_args_t *args;
    const tree_t *tree, *right_tree;
} render_input_t;

/* Appends the rendering to out; 0, or -1 (err set, or left unset for out of memory,
 * which query_render then reports). */
typedef int (*render_fn)(const render_input_t *in, buf_t *out, hr_err_t *err);

typedef struct {
    const char *name;
    const char *alias; /* a second name it answers to, listed nowhere (flamegraph: "json"); NULL */
    render_kind_t kind;
    unsigned needs; /* RENDER_STACKS | RENDER_TIMELINE | RENDER_TREE */
    const char *content_type;
    const char *disposition; /* Content-Disposition of the reply; NULL: shown inline */
    render_fn fn;
} renderer_t;

/* The row of kind `kind` named (or aliased) `name`; NULL when there is none. */
const renderer_t *render_find(const char *name, render_kind_t kind);
/* The names of kind `kind`, in table order, as "a, b or c" (for a 400's message). */
void render_names(render_kind_t kind, buf_t *out);
/* Runs row r over a: builds the call trees when r needs them, renders into out and
 * frees the trees. a->m (and a->right) stay the caller's; tree building adds
 * address names to their symtabs. RENDER_DIFF refuses sides of different profile
 * types (HR_EINVAL). 0, or -1 with err set (HR_ENOMEM when out ran out of memory). */
int query_render(const renderer_t *r, const render_args_t *a, buf_t *out, hr_err_t *err);

/* ---- the renderers themselves ---- */

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
/* Writes `{"version":1,"flamebearer":{"names":[...],"levels":[[...]...]` (the object left
 * open for the caller's totals), shared by the single and the diff documents. */
void render_bearer_open(const flamebearer_t *fb, buf_t *out);
/* The diff of two trees as one flamebearer (diff.c): 7 numbers per node, [left x
 * delta, left total, left self, right x delta, right total, right self, name index];
 * total is the sum of both roots. Names are borrowed from the trees. 0 or -1 (OOM). */
int diffbearer_build(const tree_t *left, const tree_t *right, size_t max_nodes, flamebearer_t *fb);
void flamebearer_destroy(flamebearer_t *fb);

/* A group's labels as a JSON object, {"name":"value",...}, leaving out the labels the
 * group lacks (value ""), as every grouped answer writes them. */
void render_group_labels(const char *const *names, const char *const *vals, size_t width, buf_t *out);

/* Writes the flamebearer document. max_nodes 0 = no trimming; groups (optional) fills
 * Pyroscope's `groups` map (first label's value -> timeline). */
int render_flamegraph(const tree_t *t, const merge_result_t *r, size_t max_nodes, const grouped_t *groups, buf_t *out);
/* Every function's self and total in t and r (merge.h's fn_*), by string id of t->sym
 * (t->sym->nstrings of each, malloc'd: the caller frees both). 0 or -1 (OOM). */
int top_sums(const tree_t *t, const merge_result_t *r, int64_t **self, int64_t **total);
/* Sorts ids (string ids of names) as the top table lists functions: by self[id],
 * largest first, ties by name. */
void top_rank(uint32_t *ids, size_t n, const int64_t *self, const symtab_t *names);
/* Writes {"functions":[{"name","self","total"}...],"total":N,"unit":U,...}. */
int render_top(const tree_t *t, const merge_result_t *r, size_t limit, buf_t *out);
int render_folded(const tree_t *t, buf_t *out);
/* Grafana's flame graph data frame: {"fields":{"level","value","self","label"}},
 * rows in depth-first pre-order, unit ns/bytes/short. */
int render_dataframe(const tree_t *t, const merge_result_t *r, buf_t *out);
/* time_nanos and duration_nanos are the span of the merged profiles (r->first_ns,
 * r->end_ns), 0 for an empty merge. */
int render_pprof(const merge_result_t *r, buf_t *out, hr_err_t *err);
/* One function's rows by (file, line): {"function","lines":[{"file","line","self","total"}],
 * "self","total","unit"}; an unknown function has no rows. 0 or -1 (OOM). */
int render_lines(const merge_result_t *r, const char *function, buf_t *out);
/* {"function","callers":FLAMEBEARER,"callees":FLAMEBEARER}: the function's callers
 * (rooted at it, inverted) and callees, each sample counted once per side. r's
 * symtab gains the names it lacked. 0 or -1 (err set, or OOM). */
int render_sandwich(merge_result_t *r, const char *function, size_t max_nodes, buf_t *out, hr_err_t *err);
/* The source view of a function (pprof's weblist, Parca's source view): the file its
 * lines mostly lie in, every line of it with its text and self and total, as
 * {"function","file","buildId","origin","lines":[{"line","text","self","total"}],
 * "self","total","unit"}; without the text ("origin": null, "error": why) only the
 * lines that have values, text null. 0 or -1 (OOM). */
int render_source(const merge_result_t *r, const char *function, const source_fetch_t *src, buf_t *out);
/* Pyroscope's tree bytes (PROFILE_FORMAT_TREE; pyrotree.c), truncated to max_nodes as
 * Pyroscope does (0 = every node). An empty tree writes nothing. 0 or -1 (OOM). */
int render_pyroscope_tree(const tree_t *t, size_t max_nodes, buf_t *out);
/* The flame graph as one SVG document (icicle, frames under half a pixel left out).
 * 0 or -1 (OOM). */
int render_svg(const tree_t *t, const merge_result_t *r, buf_t *out);
/* The call graph as Graphviz DOT, as go tool pprof -dot draws it (dot.c): the
 * max_nodes functions with the largest cum (0: all), flat and cum per node, edges
 * weighted once per sample. 0 or -1 (OOM). */
int render_dot(const tree_t *t, const merge_result_t *r, size_t max_nodes, buf_t *out);
#define RENDER_DOT_MAX_NODES 100 /* upstream's default for DOT */
/* The same profile.proto, not gzipped (Connect's SelectMergeProfile reply). */
int render_pprof_raw(const merge_result_t *r, buf_t *out, hr_err_t *err);
/* {"profileType",...,"points","total","profiles"}, plus "groups" and "other" when
 * groups is given. */
void render_timeseries(const merge_result_t *r, const grouped_t *groups, buf_t *out);

/* Pyroscope's "double" flamebearer of two merges of the same profile type (see
 * diff.c); metadata comes from lm. */
int render_diff(const tree_t *left, const merge_result_t *lm, const tree_t *right, size_t max_nodes, buf_t *out);
/* Shared by the flame graph renderers: the metadata object for r, with format
 * "single" or "double". */
void render_metadata(const merge_result_t *r, const char *format, buf_t *out);

#endif
