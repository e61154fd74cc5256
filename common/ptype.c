/* ptype.c - see ptype.h. */
#include "common/ptype.h"

#include <stdio.h>
#include <string.h>

const char *ptype_default_display(const char *t) {
    if (!strcmp(t, "samples")) return "cpu";
    if (!strcmp(t, "contentions")) return "mutex_count";
    if (!strcmp(t, "delay")) return "mutex_duration";
    if (!strcmp(t, "goroutine")) return "goroutines";
    return NULL;
}

void ptype_name(const char *const *types, size_t n, char *out, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(types[i], "wall")) {
            snprintf(out, len, "wall");
            return;
        }
    for (size_t i = 0; i < n; i++) {
        const char *t = types[i];
        const char *name = NULL;
        if (strstr(t, "cpu")) name = "process_cpu";
        else if (strstr(t, "alloc_") || strstr(t, "inuse_") || !strcmp(t, "space") || !strcmp(t, "objects"))
            name = "memory";
        else if (strstr(t, "mutex_")) name = "mutex";
        else if (strstr(t, "block_")) name = "block";
        else if (strstr(t, "goroutines")) name = "goroutine";
        if (name) {
            snprintf(out, len, "%s", name);
            return;
        }
    }
    /* No rule matched (threadcreate, custom types): name the type after itself. */
    snprintf(out, len, "%s", n && types[0][0] ? types[0] : "unknown");
}

int ptype_split(const char *id, ptype_parts_t *p) {
    char *fields[5] = {p->name, p->sample_type, p->sample_unit, p->period_type, p->period_unit};
    size_t caps[5] = {sizeof p->name, sizeof p->sample_type, sizeof p->sample_unit, sizeof p->period_type,
                      sizeof p->period_unit};
    const char *s = id;
    for (int i = 0; i < 5; i++) {
        const char *e = strchr(s, ':');
        if ((i < 4) != (e != NULL)) return -1;
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n >= caps[i]) return -1;
        memcpy(fields[i], s, n);
        fields[i][n] = 0;
        s = e ? e + 1 : s + n;
    }
    return 0;
}

int ptype_is_gauge(const ptype_parts_t *p) {
    return !strncmp(p->sample_type, "inuse_", 6) || !strcmp(p->sample_type, "goroutine") ||
           !strcmp(p->sample_type, "goroutines") || !strcmp(p->name, "goroutine");
}

const char *ptype_units(const ptype_parts_t *p, long long *rate) {
    *rate = 100;
    if (!strcmp(p->sample_unit, "nanoseconds")) {
        *rate = 1000000000LL;
        if (!strcmp(p->sample_type, "delay")) return "lock_nanoseconds";
        return "samples";
    }
    if (!strcmp(p->sample_unit, "bytes")) return "bytes";
    if (!strcmp(p->sample_type, "goroutine") || !strcmp(p->sample_type, "goroutines")) return "goroutines";
    if (!strcmp(p->sample_type, "contentions")) return "lock_samples";
    if (strstr(p->sample_type, "objects")) return "objects";
    return "samples";
}

const char *ptype_from_suffix(const char *suffix) {
    static const struct {
        const char *suffix, *type;
    } table[] = {
        {"cpu", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"},
        {"itimer", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"},
        {"wall", "wall:wall:nanoseconds:wall:nanoseconds"},
        {"inuse_objects", "memory:inuse_objects:count:space:bytes"},
        {"inuse_space", "memory:inuse_space:bytes:space:bytes"},
        {"alloc_objects", "memory:alloc_objects:count:space:bytes"},
        {"alloc_space", "memory:alloc_space:bytes:space:bytes"},
        {"mutex_count", "mutex:contentions:count:mutex:count"},
        {"mutex_duration", "mutex:delay:nanoseconds:mutex:count"},
        {"block_count", "block:contentions:count:block:count"},
        {"block_duration", "block:delay:nanoseconds:block:count"},
        {"goroutines", "goroutine:goroutine:count:goroutine:count"},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(suffix, table[i].suffix)) return table[i].type;
    return NULL;
}

/* Pyroscope's short names (its legacy ingest's list, plus `heap` for Go users who
 * name the endpoint), each with the sample type and unit it means and the profile
 * names that may carry it, in preference order. Rows of one short name are tried
 * in order: `cpu` is CPU time, in a process_cpu profile or, from the Node agent, in
 * its wall profile; then a sample count. block and mutex never stand in for each
 * other: that is the confusion the naming is about. */
static const struct {
    const char *short_name, *sample_type, *unit, *names[2], *fallback;
} SHORT_NAMES[] = {
    {"cpu", "cpu", "nanoseconds", {"process_cpu", "wall"}, "process_cpu:cpu:nanoseconds:cpu:nanoseconds"},
    {"cpu", "samples", "count", {"process_cpu", NULL}, NULL},
    {"itimer", "cpu", "nanoseconds", {"process_cpu", NULL}, "process_cpu:cpu:nanoseconds:cpu:nanoseconds"},
    {"itimer", "samples", "count", {"process_cpu", NULL}, NULL},
    {"wall", "wall", "nanoseconds", {"wall", NULL}, "wall:wall:nanoseconds:wall:nanoseconds"},
    {"wall", "samples", "count", {"wall", NULL}, NULL},
    {"inuse_objects", "inuse_objects", "count", {"memory", NULL}, "memory:inuse_objects:count:space:bytes"},
    {"inuse_space", "inuse_space", "bytes", {"memory", NULL}, "memory:inuse_space:bytes:space:bytes"},
    {"heap", "inuse_space", "bytes", {"memory", NULL}, "memory:inuse_space:bytes:space:bytes"},
    {"alloc_objects", "alloc_objects", "count", {"memory", NULL}, "memory:alloc_objects:count:space:bytes"},
    {"alloc_space", "alloc_space", "bytes", {"memory", NULL}, "memory:alloc_space:bytes:space:bytes"},
    {"goroutines", "goroutine", "count", {"goroutine", NULL}, "goroutine:goroutine:count:goroutine:count"},
    {"goroutines", "goroutines", "count", {"goroutine", NULL}, NULL},
    {"mutex_count", "contentions", "count", {"mutex", NULL}, "mutex:contentions:count:mutex:count"},
    {"mutex_duration", "delay", "nanoseconds", {"mutex", NULL}, "mutex:delay:nanoseconds:mutex:count"},
    {"block_count", "contentions", "count", {"block", NULL}, "block:contentions:count:block:count"},
    {"block_duration", "delay", "nanoseconds", {"block", NULL}, "block:delay:nanoseconds:block:count"},
    {"lock_count", "contentions", "count", {"mutex", "block"}, "mutex:contentions:count:mutex:count"},
    {"lock_duration", "delay", "nanoseconds", {"mutex", "block"}, "mutex:delay:nanoseconds:mutex:count"},
    {"alloc_in_new_tlab_objects",
     "alloc_in_new_tlab_objects",
     "count",
     {"memory", NULL},
     "memory:alloc_in_new_tlab_objects:count:space:bytes"},
    {"alloc_in_new_tlab_bytes",
     "alloc_in_new_tlab_bytes",
     "bytes",
     {"memory", NULL},
     "memory:alloc_in_new_tlab_bytes:bytes:space:bytes"},
    {"alloc_outside_tlab_objects",
     "alloc_outside_tlab_objects",
     "count",
     {"memory", NULL},
     "memory:alloc_outside_tlab_objects:count:space:bytes"},
    {"alloc_outside_tlab_bytes",
     "alloc_outside_tlab_bytes",
     "bytes",
     {"memory", NULL},
     "memory:alloc_outside_tlab_bytes:bytes:space:bytes"},
    {"live", "live", "count", {"memory", NULL}, NULL},
    {"exceptions", "samples", "count", {"exceptions", NULL}, NULL},
};
#define NSHORT (sizeof SHORT_NAMES / sizeof *SHORT_NAMES)

const char *ptype_short_default(const char *short_name) {
    for (size_t i = 0; i < NSHORT; i++)
        if (!strcmp(SHORT_NAMES[i].short_name, short_name))
            return SHORT_NAMES[i].fallback ? SHORT_NAMES[i].fallback : "";
    return NULL;
}

int ptype_short_rank(const char *short_name, const char *type_id) {
    ptype_parts_t p;
    if (ptype_split(type_id, &p)) return -1;
    int row = 0;
    for (size_t i = 0; i < NSHORT; i++) {
        if (strcmp(SHORT_NAMES[i].short_name, short_name)) continue;
        for (int j = 0; j < 2 && SHORT_NAMES[i].names[j]; j++)
            if (!strcmp(SHORT_NAMES[i].names[j], p.name) && !strcmp(SHORT_NAMES[i].sample_type, p.sample_type) &&
                !strcmp(SHORT_NAMES[i].unit, p.sample_unit))
                return row * 2 + j;
        row++;
    }
    return -1;
}

const char *ptype_short_name(const char *type_id) {
    for (size_t i = 0; i < NSHORT; i++)
        if (ptype_short_rank(SHORT_NAMES[i].short_name, type_id) >= 0) return SHORT_NAMES[i].short_name;
    return NULL;
}
