/* callsite.h - Pyroscope's stack trace selector: keep only the stacks that start,
 * root first, with given frames.
 *
 * A call site is a root-first list of function names (types.v1.StackTraceSelector
 * call_site: "Root at call_site[0]. Only stack traces having the prefix provided
 * will be selected"). Frames are what a flame graph shows (tree.h): each line of a
 * location is a frame, inlined callees after their caller, and a location without
 * symbols is one frame named by its address (0x...). A stack shorter than the call
 * site does not have it as a prefix and is not selected. An empty call site selects
 * every stack.
 *
 * The match is computed per segment symtab, once per query: a stack's state is its
 * parent's advanced by its own location's frames, and parents are interned before
 * their children, so one pass in id order suffices and shared prefixes are never
 * compared twice. */
#ifndef HEARTH_CALLSITE_H
#define HEARTH_CALLSITE_H

#include <stddef.h>
#include <stdint.h>

#include "storage/symtab.h"

typedef struct {
    const char *const *names; /* root first; borrowed */
    size_t n;
} callsite_t;

/* One byte per stack of sym: 1 when its root-first frames start with cs. malloc'd
 * (caller frees); NULL on OOM. sym is only read. */
uint8_t *callsite_match(const symtab_t *sym, const callsite_t *cs);

#endif
