/* tree.h - the call tree of a merged profile, by frame name.
 *
 * Merging works on location stacks; people read frames. tree_build expands each
 * stack's locations into frames (inlined functions become frames of their own,
 * outermost first; a location without symbols is named by its address) and merges
 * nodes with the same name under the same parent. Node 0 is the root ("total").
 * A child's index is always greater than its parent's, so one reverse pass computes
 * totals. Children are linked in name order, as Pyroscope draws them. */
#ifndef HEARTH_TREE_H
#define HEARTH_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "query/merge.h"

#define TREE_NONE UINT32_MAX

typedef struct {
    uint32_t parent, name; /* name: string id in the merge result's symtab */
    uint32_t first_child, next_sibling;
    int64_t self, total;
} tree_node_t;

typedef struct tree {
    tree_node_t *n;
    size_t len, cap;
    idset_t set;   /* while building: the children of nodes with many (tree.c) */
    uint8_t *kids; /* while building: children per node, up to 255 */
    size_t kids_cap;
    symtab_t *sym; /* borrowed from the merge result: the nodes' names are its strings */
} tree_t;

/* The tree of r: the stacks of r->sym added to r->tree, which the merge began when its
 * query asked for one (merge_query_t.tree; taken over here), or to a new tree. */
int tree_build(tree_t *t, merge_result_t *r, hr_err_t *err);
void tree_destroy(tree_t *t);

/* Building in steps, as a merge does (tree_build is these three):
 * tree_init starts a tree of one root node over sym; tree_add adds stacks 0..n of src
 * with a nonzero self (self by stack id), their names copied into t->sym unless src is
 * t->sym, so stacks of many symtabs can meet in one tree without first being copied
 * into one symtab; tree_finish computes totals and links children. -1 on OOM. */
int tree_init(tree_t *t, symtab_t *sym);
int tree_add(tree_t *t, const symtab_t *src, const double *self, size_t n);
int tree_finish(tree_t *t);
size_t tree_bytes(const tree_t *t);

static inline const char *tree_name(const tree_t *t, uint32_t node) { return symtab_str(t->sym, t->n[node].name); }

/* Depth-first pre-order walk. visit(ctx, node, depth, enter) is called on entering
 * (enter=1; return 0 to skip the node's children) and on leaving (enter=0). */
typedef int (*tree_visit_fn)(void *ctx, uint32_t node, size_t depth, int enter);
int tree_walk(const tree_t *t, tree_visit_fn visit, void *ctx);

#endif
