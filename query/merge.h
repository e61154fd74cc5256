/* merge.h - selecting series and merging their samples over a time range.
 *
 * A merge selects its series (catalog_select: matched without the index lock),
 * walks every segment of the tenant overlapping the range (store_scan), sums each
 * selected profile's values per stack into an accumulator: one per shared dictionary
 * (storage/symdict.h: all cached partitions of a service), or one per segment for the
 * rest (heads), then copies only the touched stacks into one output symtab
 * (symtab_import_stack), a dictionary's once per query, after the scan. The result is
 * itself a deduplicated profile: a stack trie with a self value per node. Renderers
 * (flamegraph, top, folded, pprof) read that result. A caller that wants only the call
 * tree (merge_query_t.tree) gets the dictionaries' stacks straight into one, by name:
 * copying a fleet's stacks into one symtab first would cost more than the tree itself.
 *
 * Gauges (inuse_*, goroutines) are averaged over time per series, then summed
 * across series, as Pyroscope does: merging 6 heap snapshots of one process gives
 * its typical heap, not six times it. Everything else is summed.
 *
 * With a call site (callsite.h), a profile's value is the sum of its samples whose
 * stacks have that prefix, so the flame graph, the total and the time series agree. */
#ifndef HEARTH_MERGE_H
#define HEARTH_MERGE_H

#include <stdint.h>

#include "common/budget.h"
#include "common/ptype.h"
#include "query/callsite.h"
#include "query/selector.h"
#include "query/stackfilter.h"
#include "storage/store.h"
#include "symbolize/symbolizer.h"

/* One stored profile: its series and time (as /api/v1/profiles lists them). */
typedef struct {
    uint32_t series;
    int64_t time_ns;
} profile_ref_t;

/* Restrictions finer than series: only given profiles, only given spans' samples. */
typedef struct {
    const profile_ref_t *profiles; /* sorted by (series, time); nprofiles 0 = every profile */
    size_t nprofiles;
    const uint64_t *spans; /* sorted span ids; nspans 0 = every sample. With spans,
                                    * only span samples count (segment.h): the stacks, the
                                    * totals and the timeline are those of the spans */
    size_t nspans;
    const uint64_t *traces; /* sorted trace ids, (hi, lo) pairs; ntraces 0 = any. With traces,
                             * only span samples of spans of those traces count */
    size_t ntraces;
} merge_only_t;

/* Parses a profile id as /api/v1/profiles writes it, SERIES-TIME_NS. 0 or -1. */
int profile_ref_parse(const char *s, profile_ref_t *r);
/* Writes the id profile_ref_parse reads (out: PROFILE_REF_MAX bytes). */
#define PROFILE_REF_MAX 48
void profile_ref_format(uint32_t series, int64_t time_ns, char *out);
/* Sort orders merge_only_t needs. */
void profile_refs_sort(profile_ref_t *v, size_t n);
void span_ids_sort(uint64_t *v, size_t n);
/* Sorts n trace ids, (hi, lo) pairs in v[0..2n). */
void trace_ids_sort(uint64_t *v, size_t n);
/* 1 when trace (hi, lo) is one of the sorted ids v[0..2n). */
int trace_ids_has(const uint64_t *v, size_t n, uint64_t hi, uint64_t lo);

/* What a peer is asked to merge its share for, besides the stacks' sums. */
typedef struct {
    int functions; /* merge_query_t.functions */
    int totals;    /* the share's totals, timeline (of `step`) and span too: it was dealt
                    * before the totals pass, so this node reads none of its footers */
    int64_t step;
} merge_share_ask_t;

/* The other query nodes of a cluster, for a merge split across them (split.h). fetch
 * asks peer `peer` (0..npeers) to merge the block partitions refs[0..n) of the merge's
 * selection and range and puts its answer, a share (share.h), in out. 0, or -1 with
 * err: those partitions are then merged here. Called on a thread of its own, at most
 * once per peer and merge. */
typedef struct {
    size_t npeers;
    uint64_t min_bytes; /* a merge reading fewer bytes of partitions stays here: asking peers
                         * costs round trips that a small merge does not win back */
    int (*fetch)(void *ctx, size_t peer, const store_part_ref_t *refs, size_t n, const merge_share_ask_t *ask,
                 buf_t *out, hr_err_t *err);
    void *ctx;
} merge_remote_t;

/* What a split merge did (merge_result_t.split), for metrics and logs. */
typedef struct {
    size_t parts_here, parts_sent;   /* partitions (or whole blocks) merged here / sent to peers */
    size_t shares_ok, shares_failed; /* peers' answers; a failed share is merged here */
    uint64_t peer_parts_decoded, peer_cpu_us;
} merge_split_stats_t;

typedef struct {
    const char *tenant;
    const selector_t *sel;         /* must name a profile type */
    int64_t from, until;           /* ns, inclusive */
    int64_t step;                  /* timeline bucket width in ns; 0 = no timeline */
    int want_stacks;               /* 0 = totals and timeline only */
    const merge_only_t *only;      /* NULL: everything the selector and range select */
    int64_t deadline_ns;           /* wall clock (time_now_ns); past it the merge stops with HR_ETIMEOUT; 0 = none */
    const callsite_t *call_site;   /* NULL: every stack; else only stacks with this root-first
                                  * prefix count, in the stacks, the totals and the timeline */
    int average_timeline;          /* each timeline point is the mean of the profiles in its
                                  * step, whatever the type (Grafana's aggregation AVERAGE),
                                  * instead of the type's own rule */
    symbolizer_t *symbolizer;      /* NULL: address-only frames stay as they are; else they are
                                  * resolved in the result (symbolizer.h) before any renderer
                                  * reads it, within deadline_ns */
    const stackfilter_t *filter;   /* NULL: every sample; else pprof's focus/ignore/hide
                                  * (stackfilter.h), in the stacks, totals and timeline */
    const merge_remote_t *remote;  /* NULL: merged here alone; else the block partitions are
                                   * divided among this node and the peers (sums only: gauges,
                                   * filters and restricted merges are never split) */
    const store_part_ref_t *parts; /* non-NULL: a peer's share: only these block partitions
                                    * (sorted), no head, stacks only (and totals with
                                    * share_totals); one this node does not know fails the
                                    * merge (HR_EIO), never answers less */
    size_t nparts;
    int share_totals;   /* with parts: their totals, timeline and span are wanted too */
    int functions;      /* only per-function sums are wanted (the top table): block
                                  * partitions wholly in range may be read as their function
                                  * tables (storage/functab.h), summed into the result's fn_*;
                                  * ignored for gauges and with filters (the stacks then) */
    int tree;           /* the caller builds the call tree (tree_build) and reads nothing
                                  * else of the stacks: a shared dictionary's stacks may then go
                                  * into the result's tree (merge_result_t.tree) by name, not
                                  * through the result's symtab (not for gauges or `hide`) */
    budget_hold_t *mem; /* NULL: unbudgeted; else the merge takes what its result and
                                  * tables grow to from it (429/413 past it) and keeps it: the
                                  * caller releases it once the answer is written */
} merge_query_t;

struct tree; /* query/tree.h */

typedef struct {
    symtab_t *sym;
    double *self;      /* by stack id in sym; nself == sym->nstacks after a merge */
    struct tree *tree; /* with merge_query_t.tree, or NULL: part of the stacks, already in a
                        * call tree (names are sym's strings); tree_build adds sym's stacks */
    size_t nself, self_cap;
    char type_id[512];
    ptype_parts_t type;
    int gauge;
    uint64_t profiles;
    /* The span the merged profiles cover: the earliest start and the latest end
     * (time + duration); both 0 when no profile was merged. A merged pprof is
     * dated by these, not by the query range, which may start at 0. */
    int64_t first_ns, end_ns;
    double total;
    double *timeline; /* nbuckets values from tl_start, tl_step apart */
    size_t nbuckets;
    int64_t tl_start, tl_step;
    symbolize_stats_t symbolized; /* what query-time symbolization did (zero without it) */
    /* With merge_query_t.functions: the per-function self and total of the partitions
     * read as function tables, by string id of sym (nfn of them), and the sum of their
     * values; the rest of the selection is in the stacks. A top table adds both. */
    int64_t *fn_self, *fn_total;
    size_t nfn, fn_cap;
    int64_t fn_all;
    merge_split_stats_t split; /* zero unless the merge was split */
} merge_result_t;

int merge_run(store_t *st, const merge_query_t *q, merge_result_t *out, hr_err_t *err);

/* The groups of a split merge: group_of[series id] (ngroup_of of them) names the part
 * (0..nparts) a series' profiles go to, or -1 for none. */
typedef struct {
    const int32_t *group_of;
    size_t ngroup_of;
    merge_result_t *parts; /* nparts of them, filled by merge_run_split */
    size_t nparts;
} merge_split_t;

/* One pass over q's selection (q->want_stacks 0) that fills each part with the totals,
 * timeline, span and profile count merge_run would give for the part's series alone
 * (gauges averaged per series, as there): a group-by costs one selection, not one per
 * group. The parts hold no stacks (sym NULL). 0, or -1 with err; the parts are
 * destroyed by merge_result_destroy either way (each zeroed by the caller first). */
int merge_run_split(store_t *st, const merge_query_t *q, const merge_split_t *split, hr_err_t *err);
void merge_result_destroy(merge_result_t *r);

#endif
