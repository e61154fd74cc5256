/* symbolizer.c - see symbolizer.h.
 *
 * The cache is keyed by the address's file offset (address - mapping start + mapping
 * offset), which is the same wherever ASLR placed the binary; an address whose
 * mapping has no start (start = limit = 0) is keyed by the address itself with the
 * top bit set, so the two kinds never meet. A binary_t per build ID seen holds, while
 * it is among the MAX_CACHED most recently used, its cache in memory, and while among
 * the MAX_OPEN most recently used, its open debug file. */
#include "symbolize/symbolizer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "symbolize/cache.h"
#include "symbolize/elf.h"

#define MAX_OPEN 8 /* debug files kept open (a Dwfl holds their DWARF index) */
/* Binaries whose cached answers are held in memory; the others' are read from their
 * file again when next needed. */
#define MAX_CACHED 256
#define MAX_FRAMES 64

/* A binary_t lives until the symbolizer is freed (invalidation empties it in place), so a
 * rewrite's pointers to it stay valid across the moments it lets go of the lock. */
typedef struct {
    char id[257]; /* lowercase hex */
    symcache_t *cache;
    elfobj_t *obj;
    uint64_t last_use;
    int fetching; /* a query is looking for its file on the network, without the lock */
} binary_t;

struct symbolizer {
    pthread_mutex_t mu;
    pthread_cond_t fetched; /* a binary's `fetching` went back to 0 */
    debuginfo_t *di;
    char cache_dir[4096];
    binary_t **bins;
    size_t nbins, bins_cap;
    uint64_t clock; /* use counter for the open files' and the caches' LRU */
    size_t ncached; /* binaries whose cache is loaded */
};

symbolizer_t *symbolizer_new(debuginfo_t *d, const char *data_dir, hr_err_t *err) {
    symbolizer_t *s = calloc(1, sizeof *s);
    if (!s) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    s->di = d;
    snprintf(s->cache_dir, sizeof s->cache_dir, "%s/symcache", data_dir);
    if (mkdir(s->cache_dir, 0755) && errno != EEXIST) {
        hr_fail(err, HR_EIO, "cannot create %s: %s", s->cache_dir, strerror(errno));
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->fetched, NULL);
    return s;
}

static void binary_free(binary_t *b) {
    elfobj_close(b->obj);
    symcache_close(b->cache);
    free(b);
}

void symbolizer_free(symbolizer_t *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nbins; i++) binary_free(s->bins[i]);
    free(s->bins);
    pthread_cond_destroy(&s->fetched);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

debuginfo_t *symbolizer_debuginfo(symbolizer_t *s) { return s->di; }

void symbolizer_invalidate(symbolizer_t *s, const char *id) {
    char lower[257], path[4400];
    size_t n = strnlen(id, 256);
    for (size_t i = 0; i < n; i++) lower[i] = (char)(id[i] >= 'A' && id[i] <= 'F' ? id[i] + 32 : id[i]);
    lower[n] = 0;
    snprintf(path, sizeof path, "%s/%s", s->cache_dir, lower);
    pthread_mutex_lock(&s->mu);
    binary_t *b = NULL;
    for (size_t i = 0; i < s->nbins && !b; i++)
        if (!strcmp(s->bins[i]->id, lower)) b = s->bins[i];
    if (b) { /* emptied in place: a rewrite may hold a pointer to it */
        elfobj_close(b->obj);
        s->ncached -= b->cache != NULL;
        symcache_close(b->cache);
        b->obj = NULL, b->cache = NULL;
    }
    unlink(path); /* the next use starts an empty cache */
    pthread_mutex_unlock(&s->mu);
}

/* Finds (or creates) the binary of a build ID into *out: NULL when id is not hex. 0, or
 * -1 out of memory. s->mu held. */
static int binary_get(symbolizer_t *s, const char *id, binary_t **out) {
    *out = NULL;
    if (!build_id_valid(id)) return 0;
    char lower[257];
    size_t n = strlen(id);
    for (size_t i = 0; i <= n; i++) lower[i] = (char)(id[i] >= 'A' && id[i] <= 'F' ? id[i] + 32 : id[i]);
    for (size_t i = 0; i < s->nbins; i++)
        if (!strcmp(s->bins[i]->id, lower)) return *out = s->bins[i], 0;
    binary_t *b = calloc(1, sizeof *b);
    if (!b || VEC_RESERVE(s->bins, s->bins_cap, s->nbins + 1)) return free(b), -1;
    memcpy(b->id, lower, n + 1);
    s->bins[s->nbins++] = b;
    *out = b;
    return 0;
}

/* b's cache, loaded from its file when it is not in memory (after closing the least
 * recently used one when MAX_CACHED are), so a fleet of binaries holds the answers of
 * the recently queried ones only. NULL on an I/O error (resolve anyway, without
 * persistence) and, with *oom set, when memory ran out. s->mu held. */
static symcache_t *cache_of(symbolizer_t *s, binary_t *b, int *oom) {
    if (b->cache) return b->cache;
    if (s->ncached >= MAX_CACHED) {
        binary_t *lru = NULL;
        for (size_t i = 0; i < s->nbins; i++)
            if (s->bins[i]->cache && (!lru || s->bins[i]->last_use < lru->last_use)) lru = s->bins[i];
        if (lru) symcache_close(lru->cache), lru->cache = NULL, s->ncached--; /* flushed as it closes */
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", s->cache_dir, b->id);
    hr_err_t err = {0};
    if ((b->cache = symcache_open(path, &err))) return s->ncached++, b->cache;
    if (err.code == HR_ENOMEM) *oom = 1;
    else log_event(LOG_WARN, "symbolize.cache_unavailable", "build_id=%s err=\"%s\"", b->id, err.msg);
    return NULL;
}

/* Closes the least recently used open file when MAX_OPEN are open. */
static void make_room(symbolizer_t *s) {
    size_t open = 0, lru = SIZE_MAX;
    for (size_t i = 0; i < s->nbins; i++) {
        if (!s->bins[i]->obj) continue;
        open++;
        if (lru == SIZE_MAX || s->bins[i]->last_use < s->bins[lru]->last_use) lru = i;
    }
    if (open >= MAX_OPEN) elfobj_close(s->bins[lru]->obj), s->bins[lru]->obj = NULL;
}

/* What a rewrite knows about one mapping of the symtab. */
typedef enum { MAP_UNSEEN = 0, MAP_NO_ID, MAP_OPEN, MAP_MISSING, MAP_LATE, MAP_OOM } map_state_t;

typedef struct {
    symbolizer_t *s;
    symtab_t *t;
    int64_t deadline_ns;
    symbolize_stats_t *st;
    uint8_t *state; /* map_state_t by mapping id */
    binary_t **bin; /* by mapping id, for MAP_OPEN and MAP_MISSING (the cache still answers) */
    frames_t f;     /* one location's frames */
} rewrite_t;

/* Waits (s->mu held, released meanwhile) until another query's lookup of a file ends,
 * or the deadline passes: 0, or -1 when it passed. */
static int wait_fetched(symbolizer_t *s, int64_t deadline_ns) {
    if (!deadline_ns) return pthread_cond_wait(&s->fetched, &s->mu) ? -1 : 0;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000), .tv_nsec = (long)(deadline_ns % 1000000000)};
    return pthread_cond_timedwait(&s->fetched, &s->mu, &ts) ? -1 : 0; /* CLOCK_REALTIME, as time_now_ns */
}

/* Finds b's debug file into path[cap]. The local sources are looked at under the lock;
 * a debuginfod download is waited for without it (b->fetching set, so other queries of
 * the same build ID wait for this one, each until its own deadline), so a slow or silent
 * server stalls only the queries that need its file. s->mu held on entry and return. */
static debuginfo_found_t find_file(rewrite_t *r, binary_t *b, char *path, size_t cap) {
    symbolizer_t *s = r->s;
    debuginfo_found_t f = debuginfo_find_local(s->di, b->id, path, cap);
    if (f == DEBUGINFO_FOUND || !debuginfo_remote(s->di)) return f;
    b->fetching = 1;
    char id[257];
    memcpy(id, b->id, sizeof id);
    pthread_mutex_unlock(&s->mu);
    f = debuginfo_find(s->di, id, r->deadline_ns, path, cap);
    pthread_mutex_lock(&s->mu);
    b->fetching = 0;
    pthread_cond_broadcast(&s->fetched);
    return f;
}

/* MAP_OOM when memory ran out: the query fails rather than answer with addresses its
 * retry would name. */
static map_state_t look_up_mapping(rewrite_t *r, uint32_t m) {
    const sym_mapping_t *mp = &r->t->mappings[m];
    binary_t *b = NULL;
    if (mp->build_id && binary_get(r->s, symtab_str(r->t, mp->build_id), &b)) return MAP_OOM;
    if (!b) return MAP_NO_ID;
    r->bin[m] = b;
    for (;;) {
        if (b->obj) return MAP_OPEN;
        if (r->deadline_ns && time_now_ns() > r->deadline_ns) return MAP_LATE;
        if (!b->fetching) break;
        if (wait_fetched(r->s, r->deadline_ns)) return MAP_LATE;
    }
    char path[4400];
    debuginfo_found_t f = find_file(r, b, path, sizeof path);
    if (b->obj) return MAP_OPEN; /* opened by another query while this one fetched */
    if (f == DEBUGINFO_LATE) return MAP_LATE;
    if (f == DEBUGINFO_MISSING) return MAP_MISSING;
    hr_err_t err = {0};
    make_room(r->s);
    if (!(b->obj = elfobj_open(path, &err))) {
        if (err.code == HR_ENOMEM) return MAP_OOM;
        log_event(LOG_WARN, "symbolize.bad_debuginfo", "build_id=%s path=%s err=\"%s\"", b->id, path, err.msg);
        return MAP_MISSING;
    }
    return MAP_OPEN;
}

static uint64_t cache_key(const sym_mapping_t *m, uint64_t addr) {
    if ((m->start == 0 && m->limit == 0) || addr < m->start) return addr | 1ull << 63;
    return addr - m->start + m->offset;
}

/* Gives location loc the frames of f (at most MAX_FRAMES). 0 or -1 (OOM). */
static int apply_frames(symtab_t *t, uint32_t loc, const frames_t *f) {
    sym_line_t lines[MAX_FRAMES];
    uint32_t n = f->n < MAX_FRAMES ? (uint32_t)f->n : MAX_FRAMES;
    for (uint32_t i = 0; i < n; i++) {
        const frame_t *x = &f->v[i];
        sym_function_t fn = {.name = symtab_string(t, x->name, strlen(x->name)),
                             .system_name = symtab_string(t, x->system_name, strlen(x->system_name)),
                             .filename = symtab_string(t, x->file, strlen(x->file))};
        if (fn.name == SYM_NONE || fn.system_name == SYM_NONE || fn.filename == SYM_NONE) return -1;
        uint32_t id = symtab_function(t, &fn);
        if (id == SYM_NONE) return -1;
        lines[i] = (sym_line_t){.function = id, .line = x->line};
    }
    return symtab_set_lines(t, loc, lines, n);
}

/* Names location loc BINARY!0xADDR. 0 or -1 (OOM). */
static int apply_address(symtab_t *t, uint32_t loc) {
    const sym_location_t *l = &t->locations[loc];
    const sym_mapping_t *m = &t->mappings[l->mapping];
    const char *file = m->filename ? symtab_str(t, m->filename) : "", *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char name[320];
    snprintf(name, sizeof name, "%.255s!0x%llx", *base ? base : "unknown", (unsigned long long)l->address);
    frames_t f = {0};
    int rc = frames_push(&f, name, name, "", 0) || apply_frames(t, loc, &f) ? -1 : 0;
    frames_destroy(&f);
    return rc;
}

/* Resolves one address-only location. 0 or -1 (OOM). */
static int rewrite_one(rewrite_t *r, uint32_t loc) {
    symtab_t *t = r->t;
    uint32_t m = t->locations[loc].mapping;
    uint64_t addr = t->locations[loc].address;
    /* Another query may have closed the file meanwhile (the LRU, an upload): look again. */
    if (!r->state[m] || (r->state[m] == MAP_OPEN && !r->bin[m]->obj)) r->state[m] = (uint8_t)look_up_mapping(r, m);
    if (r->state[m] == MAP_OOM) return r->state[m] = MAP_UNSEEN, -1;
    binary_t *b = r->bin[m];
    frames_t *f = &r->f;
    frames_clear(f);
    if (!b) return apply_address(t, loc); /* no build ID: nothing to look up */
    b->last_use = ++r->s->clock;
    const sym_mapping_t *mp = &t->mappings[m];
    uint64_t key = cache_key(mp, addr);
    int oom = 0;
    symcache_t *cache = cache_of(r->s, b, &oom);
    if (oom) return -1;
    int hit = cache ? symcache_get(cache, key, f) : 0;
    if (hit < 0) return -1;
    if (hit) r->st->cached++;
    else if (r->state[m] == MAP_OPEN && (!r->deadline_ns || time_now_ns() <= r->deadline_ns)) {
        uint64_t vaddr = elfobj_normalize(b->obj, addr, mp->start, mp->limit, mp->offset);
        if (elfobj_resolve(b->obj, vaddr, f) < 0) return -1;
        if (cache && symcache_put(cache, key, f)) return -1;
    } else if (r->state[m] == MAP_LATE || r->state[m] == MAP_OPEN) {
        r->st->late++;
    }
    if (!f->n) return r->st->unresolved++, apply_address(t, loc);
    r->st->resolved++;
    return apply_frames(t, loc, f);
}

/* Takes s->mu, waiting at most until deadline_ns (wall clock; 0 = no limit): a query
 * behind another one's download must not wait past its own --query-timeout. 0 or -1. */
static int lock_until(symbolizer_t *s, int64_t deadline_ns) {
    if (!deadline_ns) return pthread_mutex_lock(&s->mu) ? -1 : 0;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000), .tv_nsec = (long)(deadline_ns % 1000000000)};
    return pthread_mutex_timedlock(&s->mu, &ts) ? -1 : 0; /* CLOCK_REALTIME, as time_now_ns */
}

/* 1 when location i is to be rewritten: address-only, in a mapping. */
static int wanted(const symtab_t *t, size_t i) { return t->locations[i].nlines == 0 && t->locations[i].mapping; }

/* The `need` locations to rewrite, grouped by mapping (a counting sort), so each binary
 * is looked up, opened and used in one stretch. NULL when memory ran out. */
static uint32_t *by_mapping(const symtab_t *t, size_t need) {
    uint32_t *order = malloc(need * sizeof *order);
    size_t *at = calloc(t->nmappings + 1, sizeof *at);
    if (!order || !at) return free(order), free(at), NULL;
    for (size_t i = 1; i < t->nlocations; i++)
        if (wanted(t, i)) at[t->locations[i].mapping + 1]++;
    for (size_t m = 0; m < t->nmappings; m++) at[m + 1] += at[m];
    for (size_t i = 1; i < t->nlocations; i++)
        if (wanted(t, i)) order[at[t->locations[i].mapping]++] = (uint32_t)i;
    free(at);
    return order;
}

int symbolizer_rewrite(symbolizer_t *s, symtab_t *t, int64_t deadline_ns, symbolize_stats_t *st, hr_err_t *err) {
    memset(st, 0, sizeof *st);
    rewrite_t r = {.s = s, .t = t, .deadline_ns = deadline_ns, .st = st};
    size_t need = 0;
    for (size_t i = 1; i < t->nlocations; i++) need += (size_t)wanted(t, i);
    if (!need) return 0;
    r.state = calloc(t->nmappings, sizeof *r.state);
    r.bin = calloc(t->nmappings, sizeof *r.bin);
    uint32_t *order = by_mapping(t, need); /* apply_* adds no locations: the order holds */
    int rc = r.state && r.bin && order ? 0 : -1, locked = rc == 0 && lock_until(s, deadline_ns) == 0;
    for (size_t k = 0; rc == 0 && k < need; k++) {
        if (locked) rc = rewrite_one(&r, order[k]);
        else st->late++, st->unresolved++, rc = apply_address(t, order[k]);
    }
    for (size_t i = 0; locked && i < t->nmappings; i++)
        if (r.bin[i]) symcache_flush(r.bin[i]->cache); /* once each: later calls find nothing pending */
    if (locked) pthread_mutex_unlock(&s->mu);
    frames_destroy(&r.f);
    free(r.state), free(r.bin), free(order);
    if (rc) return hr_fail(err, HR_ENOMEM, "out of memory during symbolization");
    if (st->late)
        log_event(LOG_WARN, "symbolize.partial",
                  "late=%zu resolved=%zu: the query deadline passed; those frames keep their addresses", st->late,
                  st->resolved);
    return 0;
}
