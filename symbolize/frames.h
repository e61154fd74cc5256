/* frames.h - what a resolver answers for one address: its frames, innermost first.
 *
 * One address in optimized code is several frames when the compiler inlined calls
 * into it: frame 0 is the innermost inlined function at the address's own line,
 * each next frame the function that called it, at the call site's line, up to the
 * real (out-of-line) function. A list owns its strings; callers reuse one list
 * across addresses (frames_clear) so a profile's symbolization allocates little. */
#ifndef HEARTH_FRAMES_H
#define HEARTH_FRAMES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *name;        /* function name as shown (DWARF DW_AT_name, symbol or Go name); owned */
    char *system_name; /* linkage (mangled) name, or the same text as name; owned */
    char *file;        /* source file, "" when unknown; owned */
    int64_t line;      /* 0 when unknown */
} frame_t;

typedef struct {
    frame_t *v;
    size_t n, cap;
} frames_t;

/* Appends a frame, copying the strings (NULL reads as ""). 0, or -1 out of memory. */
int frames_push(frames_t *f, const char *name, const char *system_name, const char *file, int64_t line);
/* Frees the strings and empties the list, keeping its room. */
void frames_clear(frames_t *f);
/* frames_clear plus the room itself. */
void frames_destroy(frames_t *f);

#endif
