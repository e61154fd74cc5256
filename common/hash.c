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
