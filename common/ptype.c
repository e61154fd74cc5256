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
    size_t caps[5] = {sizeof p->name, sizeof p->sample_type, sizeof p->sample_unit,
                      sizeof p->period_type, sizeof p->period_unit};
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
