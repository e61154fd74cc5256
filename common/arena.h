/* arena.h - many small allocations freed together.
 *
 * A Connect request's decoded message, the response built for it and every string
 * they point to live as long as the request, as does an unpacked pprof upload; an
 * arena makes that one free instead of a walk over each message type, and each
 * allocation a pointer bump instead of a malloc. Allocations are zeroed and aligned
 * for any type. */
#ifndef HEARTH_ARENA_H
#define HEARTH_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef struct arena arena_t;

arena_t *arena_new(void);
void arena_free(arena_t *a); /* NULL is fine */
/* Zeroed memory owned by the arena; NULL on OOM. */
void *arena_alloc(arena_t *a, size_t n);
char *arena_strdup(arena_t *a, const char *s);
/* Whether an allocation has failed: a decoder that gives up (protobuf-c's unpack returns
 * NULL either way) tells out of memory from bad input by this. */
int arena_oom(const arena_t *a);
/* A protobuf-c allocator backed by the arena, for protobuf_c_message_unpack: the
 * unpacked message is freed with the arena, never with free_unpacked. */
ProtobufCAllocator arena_pb_allocator(arena_t *a);

#endif
