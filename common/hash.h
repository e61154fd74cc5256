/* hash.h - hashing, an open-addressing set of 32-bit ids, and a map of 64-bit keys.
 *
 * The interning tables (symbols, series) store their entries in arrays and need a
 * set that answers "is an entry equal to this key already there, and what is its
 * id?". idset_t keeps only (hash, id) pairs; equality is decided by a callback that
 * compares the candidate id's entry with the key, so entries are never duplicated
 * inside the table.
 *
 * Everything else that looks a number up by a number (counts per series, JFR pool
 * indices, a symbolization cache's addresses, call graph edges) uses u64map_t: the
 * key is its own equality, so the map holds (key, value) pairs itself. */
#ifndef HEARTH_HASH_H
#define HEARTH_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* eq(ctx, id, key) returns non-zero when entry `id` equals `key`. */
typedef int (*idset_eq_fn)(const void *ctx, uint32_t id, const void *key);

typedef struct {
    /* One word per slot, 32 bits of the hash above the id: a probe reads one array, and
     * the entry is compared only when those bits match. 0 = empty (the hash bits are
     * forced non-zero). */
    uint64_t *slots;
    size_t cap, len;
} idset_t;

/* Bytes an idset holds. */
static inline size_t idset_bytes(const idset_t *s) { return s->cap * sizeof *s->slots; }

/* The 32 hash bits a slot keeps (both halves folded in, never 0); they also place it. */
static inline uint64_t idset_tag(uint64_t h) {
    uint32_t t = (uint32_t)(h ^ (h >> 32));
    return t ? t : 1;
}

/* Starts loading the slot a lookup of hash begins at: a caller with many lookups to
 * make prefetches a few ahead, so their cache misses overlap. */
static inline void idset_prefetch(const idset_t *s, uint64_t hash) {
    if (s->cap) __builtin_prefetch(&s->slots[idset_tag(hash) & (s->cap - 1)]);
}

/* The id in the slot a lookup of hash begins at when that slot's hash bits match
 * (the likely answer, unconfirmed), else UINT32_MAX: for prefetching the entry a
 * lookup will compare, once idset_prefetch brought the slot in. */
static inline uint32_t idset_peek(const idset_t *s, uint64_t hash) {
    if (!s->cap) return UINT32_MAX;
    uint64_t t = idset_tag(hash), v = s->slots[t & (s->cap - 1)];
    return v >> 32 == t ? (uint32_t)v : UINT32_MAX;
}

void idset_init(idset_t *s);
void idset_free(idset_t *s);
/* Looks up key; returns its id, or UINT32_MAX if absent. */
uint32_t idset_find(const idset_t *s, uint64_t hash, const void *key, idset_eq_fn eq, const void *ctx);
/* Adds id under hash (the caller has checked it is absent). Returns 0 or -1 (OOM). */
int idset_add(idset_t *s, uint64_t hash, uint32_t id);
/* Makes room for n entries in all, so adding them does not rehash. 0 or -1 (OOM). */
int idset_reserve(idset_t *s, size_t n);

/* uint64 -> uint64, linear probing at load <= 1/2. Any key, 0 and UINT64_MAX too.
 * Zero the struct (or u64map_init) to start; u64map_free gives the memory back. */
typedef struct {
    uint64_t *keys; /* key + 1 per slot; 0: empty */
    uint64_t *vals;
    size_t cap, len;
    int has_max; /* UINT64_MAX, whose key + 1 would be 0, is kept here */
    uint64_t max_val;
} u64map_t;

void u64map_init(u64map_t *m);
void u64map_free(u64map_t *m);
/* The value of key, or NULL when absent; valid until the next u64map_put. */
uint64_t *u64map_get(const u64map_t *m, uint64_t key);
/* The value of key, added as 0 when absent (*added, may be NULL, says which); valid
 * until the next put. NULL on OOM (the map unchanged). */
uint64_t *u64map_put(u64map_t *m, uint64_t key, int *added);
/* Keys in the map. */
static inline size_t u64map_count(const u64map_t *m) { return m->len + (size_t)m->has_max; }
/* Bytes the map holds. */
static inline size_t u64map_bytes(const u64map_t *m) { return m->cap * 2 * sizeof(uint64_t); }

#endif
