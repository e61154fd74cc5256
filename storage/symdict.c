/* symdict.c - see symdict.h.
 *
 * The dictionary keeps one growing symtab (`grow`, with its interning sets and every
 * table's fingerprints) and an index of its stacks by fingerprint. Readers get
 * snapshots of it (symtab_snapshot): a new one only when a reader needs stacks the
 * newest lacks, so a cold scan that adopts a batch of partitions takes at most one
 * snapshot per batch, and a partition whose stacks were all known takes none. An old
 * snapshot is freed when its last reader releases it. References are atomic: the
 * block cache takes and counts them under its own lock without taking mu. */
#include "storage/symdict.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "storage/functab.h"

#define PREFETCH_AHEAD 8 /* fingerprint lookups in flight while mapping a partition's stacks */

typedef struct version {
    symtab_t *sym;
    size_t refs, bytes;
    struct version *next; /* older */
} version_t;

struct symdict {
    pthread_mutex_t mu;
    _Atomic size_t refs; /* atomic, so the block cache reads and takes them without mu */
    symtab_t *grow;
    idset_t by_fp;             /* ids of grow's stacks but the empty one, by fingerprint (grow's
                                * own fingerprints are the keys: a word per slot, no copy) */
    size_t indexed;            /* stacks of grow in by_fp: ids below it */
    version_t *versions;       /* newest first */
    _Atomic size_t grow_bytes; /* last counted into *bytes */
    _Atomic size_t *bytes;
    sym_fpmap_t by_name; /* string ids of the function tables' names, by fingerprint
                                * (symtab_string_fp): a table read with its names deferred
                                * is mapped by them alone */
};

static void count(symdict_t *d, size_t add, size_t sub) {
    if (!d->bytes) return;
    *d->bytes += add;
    *d->bytes -= sub;
}

static int eq_fp(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *grow = ctx;
    const sym_fp_t *a = &grow->fp[SYM_FP_STACKS][id], *b = key;
    return a->a == b->a && a->b == b->b;
}

/* d's id of the stack with fingerprint fp, or 0 (none; stack 0 is never looked up). */
static uint32_t by_fp(const symdict_t *d, const sym_fp_t *fp) {
    uint32_t id = idset_find(&d->by_fp, fp->a, fp, eq_fp, d->grow);
    return id == UINT32_MAX ? 0 : id;
}

/* Brings grow's fingerprints and the index up to date, and its byte count. mu held. */
static int index_new(symdict_t *d) {
    if (symtab_fingerprint(d->grow)) return -1;
    size_t n = d->grow->nfp[SYM_FP_STACKS];
    for (d->indexed += !d->indexed; d->indexed < n; d->indexed++) { /* from 1: stack 0 maps to 0 unlooked */
        const sym_fp_t *fp = &d->grow->fp[SYM_FP_STACKS][d->indexed];
        if (!by_fp(d, fp) && idset_add(&d->by_fp, fp->a, (uint32_t)d->indexed)) return -1;
    }
    size_t now = symtab_bytes(d->grow) + idset_bytes(&d->by_fp) + sym_fpmap_bytes(&d->by_name);
    count(d, now, d->grow_bytes);
    d->grow_bytes = now;
    return 0;
}

symdict_t *symdict_new(_Atomic size_t *bytes) {
    symdict_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->bytes = bytes;
    d->refs = 1;
    pthread_mutex_init(&d->mu, NULL);
    if (!(d->grow = symtab_new()) || index_new(d)) {
        symdict_unref(d);
        return NULL;
    }
    return d;
}

static void free_version(symdict_t *d, version_t *v) {
    count(d, 0, v->bytes);
    symtab_free(v->sym);
    free(v);
}

static void destroy(symdict_t *d) {
    for (version_t *v = d->versions, *next; v; v = next) {
        next = v->next;
        free_version(d, v);
    }
    count(d, 0, d->grow_bytes);
    symtab_free(d->grow);
    idset_free(&d->by_fp);
    sym_fpmap_free(&d->by_name);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

void symdict_ref(symdict_t *d) { d->refs++; }

void symdict_unref(symdict_t *d) {
    if (d && --d->refs == 0) destroy(d);
}

size_t symdict_refs(symdict_t *d) { return d->refs; }

size_t symdict_bytes(symdict_t *d) { return d->grow_bytes; }

/* The stack ids seg's rows use: its symtab's, or the block's listed stacks when it was
 * read with their fingerprints (segment.h's stack_fp). */
static size_t stack_ids(const segment_t *seg) { return seg->stack_fp ? seg->nstack_fp + 1 : seg->sym->nstacks; }

/* Fills map[s] with d's id for each stack s that seg's samples or span samples name:
 * found by fingerprint, or copied into grow; map has room for stack_ids(seg).
 * Only those are looked up: the trie's inner stacks (most of a partition's, and a
 * cache miss each in a cold fleet query) are reached through them when copied and
 * are never named by a sample after adoption. mu held. 0; 1 when a stack is new and
 * seg has no symbols to copy it from (grow unchanged); -1 (OOM; grow may then hold
 * some of the stacks, which is harmless: they are valid entries). */
static int map_stacks(symdict_t *d, const segment_t *seg, uint32_t *map) {
    const symtab_t *src = seg->sym;
    size_t nids = stack_ids(seg);
    uint32_t *want = malloc((nids + 1) * sizeof *want);
    if (!want) return -1;
    memset(map, 0, nids * sizeof *map); /* 0: not named (or the empty stack) */
    size_t n = 0, missing = 0;
    for (size_t i = 0; i < seg->nsamples + seg->nspans; i++) {
        uint32_t s = i < seg->nsamples ? seg->stacks[i] : seg->spans[i - seg->nsamples].stack;
        if (s && !map[s]) map[s] = UINT32_MAX, want[n++] = s;
    }
    const sym_fp_t *fp = seg->stack_fp ? seg->stack_fp : src->fp[SYM_FP_STACKS];
    for (size_t k = 0; k < n && k < PREFETCH_AHEAD; k++) idset_prefetch(&d->by_fp, fp[want[k]].a);
    const sym_fp_t *known = d->grow->fp[SYM_FP_STACKS];
    for (size_t k = 0; k < n; k++) {
        /* A cold fleet query maps the stacks of thousands of partitions: two cache misses
         * each (the set's slot, then the fingerprint it names), unless they overlap. So
         * the slot is fetched PREFETCH_AHEAD lookups ahead, and halfway there the
         * fingerprint its id names. */
        if (k + PREFETCH_AHEAD < n) idset_prefetch(&d->by_fp, fp[want[k + PREFETCH_AHEAD]].a);
        if (k + PREFETCH_AHEAD / 2 < n) {
            uint32_t id = idset_peek(&d->by_fp, fp[want[k + PREFETCH_AHEAD / 2]].a);
            if (id != UINT32_MAX) __builtin_prefetch(&known[id]);
        }
        uint32_t id = by_fp(d, &fp[want[k]]);
        if (id) map[want[k]] = id;
        else want[missing++] = want[k]; /* k >= missing: the list is rewritten behind the reader */
    }
    int rc = missing && !src ? 1 : 0;
    symtab_remap_t m = {0}; /* destroying a zeroed one frees nothing */
    if (missing && rc == 0 && symtab_remap_init(&m, src)) rc = -1;
    for (size_t k = 0; k < missing && rc == 0; k++) {
        uint32_t id = seg->stack_src ? seg->stack_src[want[k]] : want[k]; /* its id in src */
        if ((map[want[k]] = symtab_import_stack(d->grow, &m, id)) == SYM_NONE) rc = -1;
    }
    symtab_remap_destroy(&m);
    if (missing && rc == 0) rc = index_new(d);
    free(want);
    return rc;
}

/* Fills map with d's ids of ft's names by their fingerprints. 0, or 1 when one is not
 * known (map then partly filled). mu held. */
static int known_names(const symdict_t *d, const functab_t *ft, uint32_t *map) {
    for (size_t i = 0; i < ft->nnames && i < PREFETCH_AHEAD; i++) sym_fpmap_prefetch(&d->by_name, ft->fp[i]);
    for (size_t i = 0; i < ft->nnames; i++) {
        if (i + PREFETCH_AHEAD < ft->nnames) sym_fpmap_prefetch(&d->by_name, ft->fp[i + PREFETCH_AHEAD]);
        if (!(map[i] = sym_fpmap_get(&d->by_name, ft->fp[i]))) return 1;
    }
    return 0;
}

/* Interns ft's names into grow, filling map, and indexes those that came with
 * fingerprints by them (a table written before fingerprints has none to match). 0 or
 * -1 (OOM: grow may then hold some of the names, which is harmless). mu held. */
static int intern_names(symdict_t *d, const functab_t *ft, uint32_t *map) {
    for (size_t i = 0; i < ft->nnames; i++) {
        const char *s = ft->names + ft->name_off[i];
        if ((map[i] = symtab_string(d->grow, s, strlen(s))) == SYM_NONE) return -1;
        uint32_t *slot = ft->fp && map[i] ? sym_fpmap_slot(&d->by_name, ft->fp[i]) : NULL;
        if (ft->fp && map[i] && !slot) return -1;
        if (slot) *slot = map[i];
    }
    return index_new(d);
}

/* symdict_adopt for a function table: its names become strings of grow. */
static int adopt_names(symdict_t *d, segment_t *seg) {
    functab_t *ft = seg->funcs;
    uint32_t *map = malloc((ft->nnames + 1) * sizeof *map);
    if (!map) return -1;
    pthread_mutex_lock(&d->mu);
    int rc = ft->fp ? known_names(d, ft, map) : 1;
    if (rc == 1) rc = ft->names ? intern_names(d, ft, map) : 1; /* without names: the caller reads them */
    size_t need = d->grow->nstrings;
    if (rc == 0) d->refs++;
    pthread_mutex_unlock(&d->mu);
    if (rc == 0) {
        for (size_t e = 0; e < ft->nentries; e++) ft->fn[e] = map[ft->fn[e]];
        free(ft->names), free(ft->name_off), free(ft->fp), free(ft->names_sec);
        ft->names = NULL, ft->name_off = NULL, ft->fp = NULL, ft->names_sec = NULL, ft->names_sec_len = 0;
        seg->dict = d;
        seg->dict_strings = need;
    }
    free(map);
    return rc;
}

int symdict_adopt(symdict_t *d, segment_t *seg) {
    if (seg->funcs) return adopt_names(d, seg);
    symtab_t *src = seg->sym;
    if (!seg->stack_fp && (!src || src->nfp[SYM_FP_STACKS] < src->nstacks))
        return -1; /* no fingerprints: a caller's bug, refused */
    uint32_t *map = malloc((stack_ids(seg) + 1) * sizeof *map);
    if (!map) return -1;
    pthread_mutex_lock(&d->mu);
    int rc = map_stacks(d, seg, map);
    size_t need = d->grow->nstacks;
    if (rc == 0) d->refs++;
    pthread_mutex_unlock(&d->mu);
    if (rc == 0) {
        for (size_t i = 0; i < seg->nsamples; i++) seg->stacks[i] = map[seg->stacks[i]];
        for (size_t i = 0; i < seg->nspans; i++) seg->spans[i].stack = map[seg->spans[i].stack];
        symtab_free(src);
        free(seg->stack_fp), free(seg->stack_src);
        seg->stack_fp = NULL, seg->stack_src = NULL, seg->nstack_fp = 0;
        seg->sym = NULL;
        seg->dict = d;
        seg->dict_stacks = need;
    }
    free(map);
    return rc;
}

/* Makes the newest version hold at least `stacks` stacks and `strings` strings (all
 * of grow's when it is taken anew). mu held. 0 or -1 (OOM). */
static int refresh(symdict_t *d, size_t stacks, size_t strings) {
    if (d->versions && d->versions->sym->nstacks >= stacks && d->versions->sym->nstrings >= strings) return 0;
    version_t *v = calloc(1, sizeof *v);
    if (!v || !(v->sym = symtab_snapshot(d->grow))) {
        free(v);
        return -1;
    }
    v->bytes = symtab_bytes(v->sym);
    count(d, v->bytes, 0);
    version_t *old = d->versions;
    v->next = old;
    d->versions = v;
    if (old && old->refs == 0) { /* no reader: gone now that it is not the newest */
        v->next = old->next;
        free_version(d, old);
    }
    return 0;
}

const symtab_t *symdict_acquire(symdict_t *d, size_t stacks, size_t strings) {
    pthread_mutex_lock(&d->mu);
    const symtab_t *sym = NULL;
    if (refresh(d, stacks, strings) == 0) {
        d->versions->refs++;
        d->refs++;
        sym = d->versions->sym;
    }
    pthread_mutex_unlock(&d->mu);
    return sym;
}

void symdict_release(symdict_t *d, const symtab_t *version) {
    pthread_mutex_lock(&d->mu);
    for (version_t **p = &d->versions; *p; p = &(*p)->next) {
        version_t *v = *p;
        if (v->sym != version) continue;
        if (--v->refs == 0 && v != d->versions) { /* an older one no reader holds */
            *p = v->next;
            free_version(d, v);
        }
        break;
    }
    pthread_mutex_unlock(&d->mu);
    symdict_unref(d);
}
