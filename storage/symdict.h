/* symdict.h - a partition key's shared symbols: one copy of a service's symbols for
 * every decoded block partition of it.
 *
 * Each block partition carries a complete symbol table of its own (format/block.md), so a
 * week of one service's hourly blocks holds 168 copies of nearly the same symbols.
 * Decoded that way, a fleet's week outgrows the block cache and a merge re-maps every
 * copy into its result. Instead the block cache re-numbers each partition it decodes
 * into its key's dictionary (symdict_adopt) and frees the partition's own table: a
 * service's partitions share one table, whose size follows the service's distinct
 * stacks, and a merge sums all of a service's partitions into one array indexed by
 * the dictionary's ids before it touches a symbol (query/merge.c).
 *
 * A dictionary only grows, so an id stays valid in every later version of it. Readers
 * never see it change: symdict_acquire hands out an immutable snapshot (a version),
 * taken again only after something was added, and alive until released. Stacks are
 * recognised by their content fingerprints (symtab.h), so the same stack in two
 * partitions gets one id.
 *
 * Thread-safe: every call takes the dictionary's own mutex, which is innermost (no
 * other lock is taken under it). */
#ifndef HEARTH_SYMDICT_H
#define HEARTH_SYMDICT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/segment.h"

typedef struct symdict symdict_t;

/* A new empty dictionary with one reference (the caller's). Every byte it holds is
 * also counted in *bytes (may be NULL), which several dictionaries may share: the
 * block cache's budget. NULL on OOM. */
symdict_t *symdict_new(_Atomic size_t *bytes);
/* Takes / drops a reference; the last drop frees the dictionary (versions still
 * acquired hold references of their own). NULL is fine for unref. */
void symdict_ref(symdict_t *d);
void symdict_unref(symdict_t *d);
/* References held now (a hint for pruning: 1 means only the caller's). */
size_t symdict_refs(symdict_t *d);

/* Re-numbers seg's stacks (its samples' and span samples' stack ids) into d. The
 * stacks are known by the fingerprints a block stored (seg->stack_fp, a read with
 * BLOCK_VIEW_DEFER_SYMBOLS) or else by seg->sym's own (symtab_fingerprint_stacks).
 * On success seg->sym (and the stored fingerprints) are freed and NULL, seg->dict is
 * d, seg->dict_stacks the dictionary's size its ids need, and the caller holds one
 * more reference to d for seg (dropped when seg is freed). Returns 1, seg and d
 * unchanged, when seg->sym is NULL and some stack is new to d: the caller decodes
 * the symbols (block_part_symbols) and calls again.
 * Rows are then no longer sorted by stack id within a profile (merges do not need it;
 * block encoding never sees such a segment). For a function table (seg->funcs, no sym)
 * its names become d's strings instead: seg->dict_strings is then the dictionary's
 * strings its ids need, and the table's own names are freed. A table read with its
 * names deferred (block.h) is mapped by their fingerprints; 1 when one is new to d:
 * the caller reads the names (block_funcs_names) and calls again.
 * 0, 1 (above), or -1 on OOM (seg unchanged). */
int symdict_adopt(symdict_t *d, segment_t *seg);

/* The newest version, holding at least `stacks` stacks and `strings` strings (a
 * segment's dict_stacks and dict_strings: every id it uses), each stack with its
 * fingerprint (read-only; fp[SYM_FP_STACKS] covers every stack). Valid until
 * symdict_release, which also drops the reference to d the call took. NULL on OOM. */
const symtab_t *symdict_acquire(symdict_t *d, size_t stacks, size_t strings);
void symdict_release(symdict_t *d, const symtab_t *version);

/* Bytes of the growing table (without the versions handed out). */
size_t symdict_bytes(symdict_t *d);

#endif
