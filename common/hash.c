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
    free(s->hashes);
    free(s->ids);
    idset_init(s);
}

static inline uint64_t nonzero(uint64_t h) { return h ? h : 1; }

uint32_t idset_find(const idset_t *s, uint64_t hash, const void *key, idset_eq_fn eq, const void *ctx) {
    if (!s->cap) return UINT32_MAX;
    hash = nonzero(hash);
    size_t mask = s->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        if (s->hashes[i] == 0) return UINT32_MAX;
        if (s->hashes[i] == hash && eq(ctx, s->ids[i], key)) return s->ids[i];
    }
}

static void put(uint64_t *hashes, uint32_t *ids, size_t cap, uint64_t hash, uint32_t id) {
    size_t mask = cap - 1;
    size_t i = hash & mask;
    while (hashes[i]) i = (i + 1) & mask;
    hashes[i] = hash;
    ids[i] = id;
}

/* Rehashes into cap slots (a power of two above the entry count). */
static int rehash(idset_t *s, size_t cap) {
    uint64_t *h = calloc(cap, sizeof *h);
    uint32_t *ids = malloc(cap * sizeof *ids);
    if (!h || !ids) {
        free(h);
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++)
        if (s->hashes[i]) put(h, ids, cap, s->hashes[i], s->ids[i]);
    free(s->hashes);
    free(s->ids);
    s->hashes = h;
    s->ids = ids;
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
    put(s->hashes, s->ids, s->cap, nonzero(hash), id);
    s->len++;
    return 0;
}
