/* split.h - dividing one merge's block partitions among cluster nodes.
 *
 * A fleet-wide query reads thousands of partitions; in a cluster every query node can
 * decode them. The node asked plans the split (split_plan: each block, or each partition
 * when the blocks are too few to spread, to one node, the largest first onto the least
 * loaded, by bytes), asks each live peer
 * for its share on a thread of its own (split_start: the peer merges those partitions
 * and answers a share, share.h), merges its own share meanwhile, and then collects
 * the peers' answers (split_join). A peer that fails or is unreachable has its
 * partitions merged by the asking node instead, so a node lost mid-query costs time,
 * not data. */
#ifndef HEARTH_SPLIT_H
#define HEARTH_SPLIT_H

#include "query/merge.h"

/* Whether a merge over nblocks blocks deals whole blocks (4 per node or more, so they
 * spread), planned from the catalog's block list without reading a footer
 * (store_plan_blocks_locked), rather than the partitions the footers name. */
int split_by_blocks(size_t nblocks, size_t nodes);

/* Partitions refs[0..n) (sorted, with their sizes in bytes) divided among `nodes`
 * nodes, a block's partitions kept together once there are 4 blocks per node or more:
 * shares[k] (malloc'd, sorted) with nshares[k] refs, k = 0 being this node's.
 * Deterministic for the same input. 0 or -1 (OOM). */
int split_plan(const store_part_ref_t *refs, const uint64_t *bytes, size_t n, size_t nodes, store_part_ref_t **shares,
               size_t *nshares);

typedef struct split_run split_run_t;
/* Asks peer k - 1 (rm->fetch) for shares[k], k = 1..npeers, each on a thread (a peer
 * with no share is not asked). shares stay the caller's until split_join. NULL on OOM
 * (the caller then merges every share itself). */
split_run_t *split_start(const merge_remote_t *rm, store_part_ref_t *const *shares, const size_t *nshares,
                         const merge_share_ask_t *ask);
/* Waits for every peer. Then, for peer k = 1..npeers: *ok[k] 1 and body[k] its share's
 * bytes (the caller frees them), or 0 with err[k] saying why (also when not asked:
 * nothing to do, ok 1 with an empty body). Frees s. */
void split_join(split_run_t *s, int *ok, buf_t *body, hr_err_t *err);

#endif
