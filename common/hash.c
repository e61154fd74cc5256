/* hash.c - see hash.h. */
#include "common/hash.h"

#include <stdlib.h>
#include <string.h>

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed) {
    /* FNV-1a over 8-byte words, finished with a mixer: fast enough for symbol keys
     * of a few dozen bytes and good enough for linear probing. */
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        s += 8;
        n -= 8;
    }
    while (n--) h = (h ^ *s++) * 0x100000001b3ULL;
    return hash_mix(h, n);
}

void idset_init(idset_t *s) { memset(s, 0, sizeof *s); }

void idset_free(idset_t *s) {
    free(s->slots);
    idset_init(s);
}

uint32_t idset_find(const idset_t *s, uint64_t hash, const void *key, idset_eq_fn eq, const void *ctx) {
    if (!s->cap) return UINT32_MAX;
    uint64_t t = idset_tag(hash);
    size_t mask = s->cap - 1;
    for (size_t i = t & mask;; i = (i + 1) & mask) {
        uint64_t v = s->slots[i];
        if (v == 0) return UINT32_MAX;
        if (v >> 32 == t && eq(ctx, (uint32_t)v, key)) return (uint32_t)v;
    }
}

static void put(uint64_t *slots, size_t cap, uint64_t t, uint32_t id) {
    size_t mask = cap - 1;
    size_t i = t & mask;
    while (slots[i]) i = (i + 1) & mask;
    slots[i] = t << 32 | id;
}

/* Rehashes into cap slots (a power of two above the entry count). */
static int rehash(idset_t *s, size_t cap) {
    uint64_t *v = calloc(cap, sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i]) put(v, cap, s->slots[i] >> 32, (uint32_t)s->slots[i]);
    free(s->slots);
    s->slots = v;
    s->cap = cap;
    return 0;
}

int idset_reserve(idset_t *s, size_t n) {
    size_t cap = s->cap ? s->cap : 64;
    while (n * 4 > cap * 3) cap *= 2; /* load <= 0.75 */
    return cap == s->cap ? 0 : rehash(s, cap);
}

int idset_add(idset_t *s, uint64_t hash, uint32_t id) {
    if ((s->len + 1) * 4 > s->cap * 3 && rehash(s, s->cap ? s->cap * 2 : 64) != 0) return -1; /* load <= 0.75 */
    put(s->slots, s->cap, idset_tag(hash), id);
    s->len++;
    return 0;
}

/* ---- u64map ---- */

void u64map_init(u64map_t *m) { memset(m, 0, sizeof *m); }

void u64map_free(u64map_t *m) {
    free(m->keys);
    free(m->vals);
    u64map_init(m);
}

/* The slot of stored key k (key + 1): its own, or the empty one where it would go. */
static size_t u64_slot(const uint64_t *keys, size_t cap, uint64_t k) {
    size_t i = (size_t)(hash_mix(k, 0x2545f4914f6cdd1dULL)) & (cap - 1);
    while (keys[i] && keys[i] != k) i = (i + 1) & (cap - 1);
    return i;
}

uint64_t *u64map_get(const u64map_t *m, uint64_t key) {
    if (key == UINT64_MAX) return m->has_max ? (uint64_t *)&m->max_val : NULL;
    if (!m->cap) return NULL;
    size_t i = u64_slot(m->keys, m->cap, key + 1);
    return m->keys[i] ? &m->vals[i] : NULL;
}

static int u64_grow(u64map_t *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *k = calloc(cap, sizeof *k), *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t j = u64_slot(k, cap, m->keys[i]);
            k[j] = m->keys[i], v[j] = m->vals[i];
        }
    free(m->keys), free(m->vals);
    m->keys = k, m->vals = v, m->cap = cap;
    return 0;
}

uint64_t *u64map_put(u64map_t *m, uint64_t key, int *added) {
    int dummy;
    if (!added) added = &dummy;
    *added = 0;
    if (key == UINT64_MAX) {
        if (!m->has_max) m->has_max = 1, m->max_val = 0, *added = 1;
        return &m->max_val;
    }
    uint64_t *have = u64map_get(m, key);
    if (have) return have;
    if ((m->len + 1) * 2 > m->cap && u64_grow(m)) return NULL;
    size_t i = u64_slot(m->keys, m->cap, key + 1);
    m->keys[i] = key + 1, m->vals[i] = 0, m->len++;
    *added = 1;
    return &m->vals[i];
}
