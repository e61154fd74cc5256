/* share.h - one node's part of a merge split across cluster nodes, on the wire.
 *
 * A query node that splits a merge (merge.h's `remote`) asks each live peer to merge
 * some block partitions (store_part_ref_t) and answer its partial result: the stacks
 * it touched with their sums, and the per-function sums of the function tables it
 * read. The asking node adds those into its own result by stack fingerprint and by
 * function name, as it adds its own partitions, so the answer is the one a single node
 * gives. Only sums travel (a gauge's per-series averaging needs every partition's row
 * counts, so gauges are never split): values are exact integers.
 *
 * The request is JSON (`{"query","from","until","functions","totals","step",
 * "parts":[[block,part]...]}`, where `[block]` names every partition of the block that
 * the query selects, POST /api/v1/internal/merge-share); the answer is this binary
 * layout:
 *   "HSH2" | uvarint symtab length | symtab_encode bytes | uvarint stacks |
 *   svarint sum per stack | uvarint functions | per function: uvarint string id,
 *   svarint self, svarint total | svarint the function tables' whole sum |
 *   uvarint partitions decoded | uvarint CPU microseconds (what the share cost) |
 *   uvarint 1 when totals follow, else 0 | with totals: svarint total, uvarint
 *   profiles, svarint first ns, svarint end ns, uvarint timeline points, svarint sum
 *   per point (merge_result_t's; asked for with `"totals":true`). */
#ifndef HEARTH_SHARE_H
#define HEARTH_SHARE_H

#include "query/merge.h"

typedef struct {
    symtab_t *sym;
    int64_t *self; /* by stack id of sym, sym->nstacks of them */
    uint32_t *fn;  /* function names as string ids of sym; nfn of them */
    int64_t *fself, *ftotal;
    size_t nfn;
    int64_t fn_all;
    uint64_t parts_decoded, cpu_us;
    int has_totals; /* then the share's totals: */
    int64_t total, first_ns, end_ns;
    uint64_t profiles;
    int64_t *timeline; /* nbuckets of them */
    size_t nbuckets;
} share_t;

/* Appends r (a merge of sums: not a gauge), its totals when `totals`, and the work it
 * cost. */
void share_encode(const merge_result_t *r, int totals, uint64_t parts_decoded, uint64_t cpu_us, buf_t *out);
/* Reads share_encode's bytes into out (share_destroy it, also after a failure),
 * validating every id. 0, or -1 with err (HR_EUNPROC). */
int share_decode(const uint8_t *p, size_t n, share_t *out, hr_err_t *err);
void share_destroy(share_t *s);

#endif
