/* frames.c - see frames.h. */
#include "symbolize/frames.h"

#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

int frames_push(frames_t *f, const char *name, const char *system_name, const char *file, int64_t line) {
    if (VEC_RESERVE(f->v, f->cap, f->n + 1)) return -1;
    frame_t *x = &f->v[f->n];
    x->name = strdup(name ? name : "");
    x->system_name = strdup(system_name && *system_name ? system_name : x->name ? x->name : "");
    x->file = strdup(file ? file : "");
    x->line = line;
    if (!x->name || !x->system_name || !x->file) {
        free(x->name), free(x->system_name), free(x->file);
        return -1;
    }
    f->n++;
    return 0;
}

void frames_clear(frames_t *f) {
    for (size_t i = 0; i < f->n; i++) free(f->v[i].name), free(f->v[i].system_name), free(f->v[i].file);
    f->n = 0;
}

void frames_destroy(frames_t *f) {
    frames_clear(f);
    free(f->v);
    memset(f, 0, sizeof *f);
}
