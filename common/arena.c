/* arena.c - see arena.h. Each allocation is its own calloc, remembered in a list:
 * requests are small and short, so a bump allocator would buy nothing measurable. */
#include "common/arena.h"

#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

struct arena {
    void **ptrs;
    size_t len, cap;
};

arena_t *arena_new(void) { return calloc(1, sizeof(arena_t)); }

void arena_free(arena_t *a) {
    if (!a) return;
    for (size_t i = 0; i < a->len; i++) free(a->ptrs[i]);
    free(a->ptrs);
    free(a);
}

void *arena_alloc(arena_t *a, size_t n) {
    if (VEC_RESERVE(a->ptrs, a->cap, a->len + 1)) return NULL;
    void *m = calloc(1, n ? n : 1);
    if (m) a->ptrs[a->len++] = m;
    return m;
}

char *arena_strdup(arena_t *a, const char *s) {
    size_t n = strlen(s);
    char *d = arena_alloc(a, n + 1);
    if (d) memcpy(d, s, n);
    return d;
}

static void *pb_alloc(void *data, size_t n) { return arena_alloc(data, n); }
static void pb_free(void *data, void *p) { (void)data, (void)p; /* freed with the arena */ }

ProtobufCAllocator arena_pb_allocator(arena_t *a) { return (ProtobufCAllocator){pb_alloc, pb_free, a}; }
