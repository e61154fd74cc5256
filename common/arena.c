/* arena.c - see arena.h.
 *
 * A bump allocator over chunks: each chunk is one calloc (so every byte handed out is
 * zero without a memset per allocation), chunks double from ARENA_FIRST up to
 * ARENA_MAX, and an allocation over a quarter of the current chunk size gets a chunk of
 * its own. Unpacking a pprof makes one allocation per sample, location, line, label and
 * string (tens of thousands for a 20 KB upload); from malloc each cost a call and a
 * lock shared with every other ingest thread, here a pointer bump. */
#include "common/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_FIRST (16u << 10)
#define ARENA_MAX (1u << 20)
#define ARENA_ALIGN alignof(max_align_t)

typedef struct chunk {
    struct chunk *next;
    size_t size, used; /* of data[] */
    alignas(max_align_t) unsigned char data[];
} chunk_t;

struct arena {
    chunk_t *head;    /* the chunk being bumped; others follow */
    size_t next_size; /* the next regular chunk's size */
    int oom;          /* an allocation failed */
};

arena_t *arena_new(void) {
    arena_t *a = calloc(1, sizeof *a);
    if (a) a->next_size = ARENA_FIRST;
    return a;
}

void arena_free(arena_t *a) {
    if (!a) return;
    for (chunk_t *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

static chunk_t *chunk_new(arena_t *a, size_t size) {
    chunk_t *c = size <= SIZE_MAX - sizeof(chunk_t) ? calloc(1, sizeof *c + size) : NULL;
    if (c) c->size = size;
    else a->oom = 1;
    return c;
}

void *arena_alloc(arena_t *a, size_t n) {
    n = n ? (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1) : ARENA_ALIGN;
    if (!n) return a->oom = 1, NULL; /* rounded past SIZE_MAX */
    chunk_t *c = a->head;
    if (c && c->size - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    if (n > a->next_size / 4) { /* its own chunk, behind the one being bumped */
        chunk_t *big = chunk_new(a, n);
        if (!big) return NULL;
        big->used = n;
        if (c) big->next = c->next, c->next = big;
        else a->head = big;
        return big->data;
    }
    chunk_t *fresh = chunk_new(a, a->next_size);
    if (!fresh) return NULL;
    if (a->next_size < ARENA_MAX) a->next_size *= 2;
    fresh->next = c;
    a->head = fresh;
    fresh->used = n;
    return fresh->data;
}

char *arena_strdup(arena_t *a, const char *s) {
    size_t n = strlen(s);
    char *d = arena_alloc(a, n + 1);
    if (d) memcpy(d, s, n);
    return d;
}

int arena_oom(const arena_t *a) { return a->oom; }

static void *pb_alloc(void *data, size_t n) { return arena_alloc(data, n); }
static void pb_free(void *data, void *p) { (void)data, (void)p; /* freed with the arena */ }

ProtobufCAllocator arena_pb_allocator(arena_t *a) { return (ProtobufCAllocator){pb_alloc, pb_free, a}; }
