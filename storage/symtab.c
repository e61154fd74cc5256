/* symtab.c - see symtab.h.
 *
 * Each table is an array plus an idset over it; the idset's equality callbacks
 * compare a candidate entry with the lookup key, so an entry is stored exactly once.
 * Locations keep their lines in one shared array to avoid an allocation per
 * location. */
#include "storage/symtab.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

typedef struct {
    const char *s;
    size_t n;
} str_key_t;

typedef struct {
    uint32_t mapping;
    uint64_t address;
    const sym_line_t *lines;
    uint32_t nlines;
} loc_key_t;

static int eq_string(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *t = ctx;
    const str_key_t *k = key;
    return t->slen[id] == k->n && memcmp(t->sdata + t->soff[id], k->s, k->n) == 0;
}

static int eq_function(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *t = ctx;
    const sym_function_t *a = &t->functions[id], *b = key;
    return a->name == b->name && a->system_name == b->system_name && a->filename == b->filename &&
           a->start_line == b->start_line;
}

static int eq_mapping(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *t = ctx;
    const sym_mapping_t *a = &t->mappings[id], *b = key;
    return a->start == b->start && a->limit == b->limit && a->offset == b->offset && a->filename == b->filename &&
           a->build_id == b->build_id;
}

static int eq_location(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *t = ctx;
    const sym_location_t *a = &t->locations[id];
    const loc_key_t *k = key;
    if (a->mapping != k->mapping || a->address != k->address || a->nlines != k->nlines) return 0;
    if (k->nlines == 0) return 1; /* lines may still be NULL */
    const sym_line_t *la = t->lines + a->first_line;
    for (uint32_t i = 0; i < k->nlines; i++)
        if (la[i].function != k->lines[i].function || la[i].line != k->lines[i].line) return 0;
    return 1;
}

static int eq_stack(const void *ctx, uint32_t id, const void *key) {
    const symtab_t *t = ctx;
    const sym_stack_t *a = &t->stacks[id], *b = key;
    return a->parent == b->parent && a->location == b->location;
}

static uint64_t hash_function(const sym_function_t *f) {
    uint64_t h = hash_mix(f->name, f->system_name);
    return hash_mix(hash_mix(h, f->filename), (uint64_t)f->start_line);
}

static uint64_t hash_mapping(const sym_mapping_t *m) {
    uint64_t h = hash_mix(m->start, m->limit);
    h = hash_mix(h, m->offset);
    return hash_mix(hash_mix(h, m->filename), m->build_id);
}

static uint64_t hash_location(const loc_key_t *k) {
    uint64_t h = hash_mix(k->mapping, k->address);
    for (uint32_t i = 0; i < k->nlines; i++)
        h = hash_mix(hash_mix(h, k->lines[i].function), (uint64_t)k->lines[i].line);
    return h;
}

static uint64_t hash_stack(const sym_stack_t *s) { return hash_mix(s->parent, s->location); }

symtab_t *symtab_new(void) {
    symtab_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    static const sym_function_t f0;
    static const sym_mapping_t m0;
    static const sym_stack_t s0;
    /* The reserved entries are appended without entering the sets, except the
     * empty string, which callers legitimately intern. */
    if (symtab_string(t, "", 0) != 0 || VEC_RESERVE(t->functions, t->functions_cap, 1) ||
        VEC_RESERVE(t->mappings, t->mappings_cap, 1) || VEC_RESERVE(t->locations, t->locations_cap, 1) ||
        VEC_RESERVE(t->stacks, t->stacks_cap, 1)) {
        symtab_free(t);
        return NULL;
    }
    t->functions[t->nfunctions++] = f0;
    t->mappings[t->nmappings++] = m0;
    t->locations[t->nlocations++] = (sym_location_t){0};
    t->stacks[t->nstacks++] = s0;
    return t;
}

void symtab_free(symtab_t *t) {
    if (!t) return;
    free(t->sdata);
    free(t->soff);
    free(t->slen);
    free(t->functions);
    free(t->mappings);
    free(t->locations);
    free(t->lines);
    free(t->stacks);
    idset_free(&t->set_strings);
    idset_free(&t->set_functions);
    idset_free(&t->set_mappings);
    idset_free(&t->set_locations);
    idset_free(&t->set_stacks);
    for (int k = 0; k < 5; k++) free(t->fp[k]);
    free(t);
}

static uint64_t hash_string_id(const symtab_t *t, uint32_t id) { return hash_bytes(symtab_str(t, id), t->slen[id], 0); }

static uint64_t hash_location_id(const symtab_t *t, uint32_t id) {
    const sym_location_t *l = &t->locations[id];
    loc_key_t k = {l->mapping, l->address, t->lines + l->first_line, l->nlines};
    return hash_location(&k);
}

int symtab_reserve(symtab_t *t, const size_t n[5]) {
    idset_t *sets[5] = {&t->set_strings, &t->set_functions, &t->set_mappings, &t->set_locations, &t->set_stacks};
    for (int k = 0; k < 5; k++)
        if (idset_reserve(sets[k], n[k])) return -1;
    return 0;
}

/* Builds the sets of a symtab decoded without them (symtab_decode appends entries
 * directly: a read-only block symtab never needs them). 0 or -1 (OOM). */
static int index_sets(symtab_t *t) {
    idset_t *sets[5] = {&t->set_strings, &t->set_functions, &t->set_mappings, &t->set_locations, &t->set_stacks};
    const size_t n[5] = {t->nstrings, t->nfunctions, t->nmappings, t->nlocations, t->nstacks};
    for (int k = 0; k < 5; k++) {
        idset_free(sets[k]);
        if (idset_reserve(sets[k], n[k])) return -1;
        for (size_t i = k == 0 ? 0 : 1; i < n[k]; i++) { /* id 0 is in no set but strings' */
            uint32_t id = (uint32_t)i;
            uint64_t h = k == 0   ? hash_string_id(t, id)
                         : k == 1 ? hash_function(&t->functions[id])
                         : k == 2 ? hash_mapping(&t->mappings[id])
                         : k == 3 ? hash_location_id(t, id)
                                  : hash_stack(&t->stacks[id]);
            if (idset_add(sets[k], h, id)) return -1;
        }
    }
    t->unindexed = 0;
    return 0;
}

uint32_t symtab_string(symtab_t *t, const char *s, size_t n) {
    if (t->unindexed && index_sets(t)) return SYM_NONE;
    str_key_t k = {s, n};
    uint64_t h = hash_bytes(s, n, 0);
    uint32_t id = idset_find(&t->set_strings, h, &k, eq_string, t);
    if (id != UINT32_MAX) return id;
    size_t cap = t->strings_cap;
    if (t->nstrings >= UINT32_MAX - 1 || vec_reserve(&t->sdata, &t->sdata_cap, t->sdata_len + n + 1, 1) ||
        VEC_RESERVE(t->soff, cap, t->nstrings + 1))
        return SYM_NONE;
    if (cap != t->strings_cap) { /* slen grows in step with soff */
        uint32_t *sl = realloc(t->slen, cap * sizeof *sl);
        if (!sl) return SYM_NONE;
        t->slen = sl;
        t->strings_cap = cap;
    }
    id = (uint32_t)t->nstrings;
    memcpy(t->sdata + t->sdata_len, s, n);
    t->sdata[t->sdata_len + n] = 0;
    t->soff[id] = (uint32_t)t->sdata_len;
    t->slen[id] = (uint32_t)n;
    if (idset_add(&t->set_strings, h, id)) return SYM_NONE;
    t->sdata_len += n + 1;
    t->nstrings++;
    return id;
}

/* Interns a fixed-size entry into one of the tables (functions, mappings, stacks):
 * *arr holds *n entries of `size` bytes; set indexes them. */
static uint32_t intern_fixed(symtab_t *t, idset_t *set, void *arr, size_t *n, size_t *cap, size_t size,
                             const void *entry, uint64_t h, idset_eq_fn eq) {
    if (t->unindexed && index_sets(t)) return SYM_NONE;
    uint32_t id = idset_find(set, h, entry, eq, t);
    if (id != UINT32_MAX) return id;
    if (*n >= UINT32_MAX - 1 || vec_reserve(arr, cap, *n + 1, size)) return SYM_NONE;
    id = (uint32_t)*n;
    memcpy((char *)*(void **)arr + (size_t)id * size, entry, size);
    if (idset_add(set, h, id)) return SYM_NONE;
    (*n)++;
    return id;
}

uint32_t symtab_function(symtab_t *t, const sym_function_t *f) {
    /* An id out of range (SYM_NONE from a failed intern passed on) would be encoded
     * into a block and read past the string table by fingerprints and renderers. */
    assert(f->name < t->nstrings && f->system_name < t->nstrings && f->filename < t->nstrings);
    return intern_fixed(t, &t->set_functions, &t->functions, &t->nfunctions, &t->functions_cap, sizeof *f, f,
                        hash_function(f), eq_function);
}

uint32_t symtab_mapping(symtab_t *t, const sym_mapping_t *m) {
    assert(m->filename < t->nstrings && m->build_id < t->nstrings);
    return intern_fixed(t, &t->set_mappings, &t->mappings, &t->nmappings, &t->mappings_cap, sizeof *m, m,
                        hash_mapping(m), eq_mapping);
}

#ifndef NDEBUG
static int lines_valid(const symtab_t *t, const sym_line_t *lines, uint32_t nlines) {
    for (uint32_t i = 0; i < nlines; i++)
        if (lines[i].function >= t->nfunctions) return 0;
    return 1;
}
#endif

uint32_t symtab_location(symtab_t *t, uint32_t mapping, uint64_t address, const sym_line_t *lines, uint32_t nlines) {
    assert(mapping < t->nmappings && lines_valid(t, lines, nlines));
    if (t->unindexed && index_sets(t)) return SYM_NONE;
    loc_key_t k = {mapping, address, lines, nlines};
    uint64_t h = hash_location(&k);
    uint32_t id = idset_find(&t->set_locations, h, &k, eq_location, t);
    if (id != UINT32_MAX) return id;
    if (VEC_RESERVE(t->locations, t->locations_cap, t->nlocations + 1) ||
        VEC_RESERVE(t->lines, t->lines_cap, t->nlines + nlines))
        return SYM_NONE;
    id = (uint32_t)t->nlocations;
    t->locations[id] = (sym_location_t){mapping, address, (uint32_t)t->nlines, nlines};
    if (nlines) memcpy(t->lines + t->nlines, lines, nlines * sizeof *lines);
    if (idset_add(&t->set_locations, h, id)) return SYM_NONE;
    t->nlines += nlines;
    t->nlocations++;
    return id;
}

int symtab_set_lines(symtab_t *t, uint32_t id, const sym_line_t *lines, uint32_t nlines) {
    assert(id > 0 && id < t->nlocations && t->locations[id].nlines == 0 && lines_valid(t, lines, nlines));
    if (t->unindexed && index_sets(t)) return -1;
    if (VEC_RESERVE(t->lines, t->lines_cap, t->nlines + nlines)) return -1;
    sym_location_t *l = &t->locations[id];
    loc_key_t k = {l->mapping, l->address, lines, nlines};
    /* The old entry stays in the set under the old content's hash, where the equality
     * check (on the current content) never matches it again. */
    if (idset_add(&t->set_locations, hash_location(&k), id)) return -1;
    memcpy(t->lines + t->nlines, lines, nlines * sizeof *lines);
    l->first_line = (uint32_t)t->nlines, l->nlines = nlines;
    t->nlines += nlines;
    if (t->nfp[SYM_FP_LOCATIONS] > id) t->nfp[SYM_FP_LOCATIONS] = id;
    t->nfp[SYM_FP_STACKS] = 0;
    return 0;
}

uint32_t symtab_stack(symtab_t *t, uint32_t parent, uint32_t location) {
    /* The trie's order: a parent exists before its children, so its id is smaller
     * (encoding writes id - parent, fingerprints read the parent's first), and every
     * node but the empty stack has a location. */
    assert(parent < t->nstacks && location != 0 && location < t->nlocations);
    sym_stack_t k = {parent, location};
    return intern_fixed(t, &t->set_stacks, &t->stacks, &t->nstacks, &t->stacks_cap, sizeof k, &k, hash_stack(&k),
                        eq_stack);
}

size_t symtab_stack_depth(const symtab_t *t, uint32_t stack) {
    size_t d = 0;
    for (; stack; stack = t->stacks[stack].parent) d++;
    return d;
}

/* ---- fingerprints ---- */

/* Two lanes with their own constants, so the 64-bit halves are independent hashes. */
static sym_fp_t fp_mix(sym_fp_t h, uint64_t va, uint64_t vb) {
    h.a ^= va + 0x9e3779b97f4a7c15ULL + (h.a << 6) + (h.a >> 2);
    h.a *= 0xff51afd7ed558ccdULL;
    h.a ^= h.a >> 33;
    h.b ^= vb + 0xc2b2ae3d27d4eb4fULL + (h.b << 7) + (h.b >> 3);
    h.b *= 0xc4ceb9fe1a85ec53ULL;
    h.b ^= h.b >> 29;
    return h;
}

static sym_fp_t fp_of(sym_fp_t h, sym_fp_t v) { return fp_mix(h, v.a, v.b); }
static sym_fp_t fp_num(sym_fp_t h, uint64_t v) { return fp_mix(h, v, v); }

sym_fp_t symtab_string_fp(const char *s, size_t n) {
    sym_fp_t h = {hash_bytes(s, n, 0x5354), hash_bytes(s, n, 0x9e3779b97f4a7c15ULL)};
    return fp_num(h, n);
}

static sym_fp_t fp_string(const symtab_t *t, uint32_t i) { return symtab_string_fp(symtab_str(t, i), t->slen[i]); }

static sym_fp_t fp_function(const symtab_t *t, uint32_t i) {
    const sym_function_t *f = &t->functions[i];
    const sym_fp_t *s = t->fp[SYM_FP_STRINGS];
    assert(f->name < t->nfp[SYM_FP_STRINGS] && f->system_name < t->nfp[SYM_FP_STRINGS] &&
           f->filename < t->nfp[SYM_FP_STRINGS]);
    sym_fp_t h = fp_of(fp_of(fp_of((sym_fp_t){1, 2}, s[f->name]), s[f->system_name]), s[f->filename]);
    return fp_num(h, (uint64_t)f->start_line);
}

static sym_fp_t fp_mapping(const symtab_t *t, uint32_t i) {
    const sym_mapping_t *m = &t->mappings[i];
    const sym_fp_t *s = t->fp[SYM_FP_STRINGS];
    assert(m->filename < t->nfp[SYM_FP_STRINGS] && m->build_id < t->nfp[SYM_FP_STRINGS]);
    sym_fp_t h = fp_num(fp_num(fp_num((sym_fp_t){3, 4}, m->start), m->limit), m->offset);
    return fp_of(fp_of(h, s[m->filename]), s[m->build_id]);
}

static sym_fp_t fp_location(const symtab_t *t, uint32_t i) {
    const sym_location_t *l = &t->locations[i];
    assert(l->mapping < t->nfp[SYM_FP_MAPPINGS]);
    sym_fp_t h = fp_num(fp_of((sym_fp_t){5, 6}, t->fp[SYM_FP_MAPPINGS][l->mapping]), l->address);
    h = fp_num(h, l->nlines);
    for (uint32_t j = 0; j < l->nlines; j++) {
        const sym_line_t *ln = &t->lines[l->first_line + j];
        assert(ln->function < t->nfp[SYM_FP_FUNCTIONS]);
        h = fp_num(fp_of(h, t->fp[SYM_FP_FUNCTIONS][ln->function]), (uint64_t)ln->line);
    }
    return h;
}

static sym_fp_t fp_stack(const symtab_t *t, uint32_t i) {
    const sym_stack_t *s = &t->stacks[i];
    assert(s->parent < i && s->location < t->nfp[SYM_FP_LOCATIONS]); /* the parent's is computed first */
    return fp_of(fp_of((sym_fp_t){7, 8}, t->fp[SYM_FP_STACKS][s->parent]), t->fp[SYM_FP_LOCATIONS][s->location]);
}

int symtab_fingerprint(symtab_t *t) {
    /* In dependency order: each table's entries refer only to earlier tables, and a
     * stack to its parent, whose id is smaller. Every id-0 entry is the same reserved
     * "none" in every symtab, so its fingerprint is a constant. */
    static sym_fp_t (*const FN[5])(const symtab_t *, uint32_t) = {fp_string, fp_function, fp_mapping, fp_location,
                                                                  fp_stack};
    const size_t n[5] = {t->nstrings, t->nfunctions, t->nmappings, t->nlocations, t->nstacks};
    for (int k = 0; k < 5; k++) {
        assert(t->nfp[k] <= n[k]);     /* tables only grow: a fingerprint past the end names nothing */
        int first = t->fp_cap[k] == 0; /* a decoded table's size is final: no doubling slack */
        if ((first ? vec_reserve_exact : vec_reserve)(&t->fp[k], &t->fp_cap[k], n[k], sizeof(sym_fp_t))) return -1;
        if (t->nfp[k] == 0 && n[k]) t->fp[k][t->nfp[k]++] = (sym_fp_t){(uint64_t)k + 11, (uint64_t)k + 13};
        for (size_t i = t->nfp[k]; i < n[k]; i++) t->fp[k][i] = FN[k](t, (uint32_t)i);
        t->nfp[k] = n[k];
    }
    return 0;
}

int symtab_fingerprint_stacks(symtab_t *t) {
    int rc = symtab_fingerprint(t);
    for (int k = 0; k < SYM_FP_STACKS; k++) { /* only stacks' are read; the rest are recomputed if ever needed */
        free(t->fp[k]);
        t->fp[k] = NULL;
        t->nfp[k] = t->fp_cap[k] = 0;
    }
    return rc;
}

int symtab_stack_fps(const symtab_t *t, sym_fp_t **out) {
    /* A copy of the table headers with fingerprint arrays of its own: t itself is only read. */
    symtab_t w = *t;
    for (int k = 0; k < 5; k++) w.fp[k] = NULL, w.nfp[k] = w.fp_cap[k] = 0;
    int rc = symtab_fingerprint(&w);
    for (int k = 0; k < SYM_FP_STACKS; k++) free(w.fp[k]);
    if (rc) free(w.fp[SYM_FP_STACKS]);
    *out = rc ? NULL : w.fp[SYM_FP_STACKS];
    return rc;
}

static size_t fp_home(const sym_fpmap_t *m, sym_fp_t fp) {
    size_t j = fp.a & (m->cap - 1);
    while (m->slots[j].id && (m->slots[j].fp.a != fp.a || m->slots[j].fp.b != fp.b)) j = (j + 1) & (m->cap - 1);
    return j;
}

uint32_t *sym_fpmap_slot(sym_fpmap_t *m, sym_fp_t fp) {
    if ((m->len + 1) * 2 > m->cap) { /* load <= 0.5: probes stay short */
        size_t ncap = m->cap ? m->cap * 2 : 4096;
        sym_fpmap_t n = {calloc(ncap, sizeof *n.slots), ncap, 0};
        if (!n.slots) return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].id) n.slots[fp_home(&n, m->slots[i].fp)] = m->slots[i], n.len++;
        free(m->slots);
        *m = n;
    }
    size_t j = fp_home(m, fp);
    if (!m->slots[j].id) m->slots[j].fp = fp, m->len++; /* counted even if left empty: a bound, not a count */
    return &m->slots[j].id;
}

uint32_t sym_fpmap_get(const sym_fpmap_t *m, sym_fp_t fp) { return m->cap ? m->slots[fp_home(m, fp)].id : 0; }

size_t sym_fpmap_bytes(const sym_fpmap_t *m) { return m->cap * sizeof *m->slots; }

void sym_fpmap_free(sym_fpmap_t *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* Copies n elements of size bytes from src into a new exact array (*dst, *cap). */
static int copy_exact(void *dst, size_t *cap, const void *src, size_t n, size_t size) {
    void **d = dst;
    *d = NULL;
    *cap = 0;
    if (!n) return 0;
    if (!(*d = malloc(n * size))) return -1;
    memcpy(*d, src, n * size);
    *cap = n;
    return 0;
}

symtab_t *symtab_snapshot(const symtab_t *t) {
    symtab_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->unindexed = 1;
    size_t slen_cap, n = t->nfp[SYM_FP_STACKS]; /* soff and slen share strings_cap */
    c->sdata_len = t->sdata_len;
    c->nstrings = t->nstrings, c->nfunctions = t->nfunctions, c->nmappings = t->nmappings;
    c->nlocations = t->nlocations, c->nlines = t->nlines, c->nstacks = t->nstacks;
    c->nfp[SYM_FP_STACKS] = n;
    int bad = copy_exact(&c->sdata, &c->sdata_cap, t->sdata, t->sdata_len, 1) ||
              copy_exact(&c->soff, &c->strings_cap, t->soff, t->nstrings, sizeof *t->soff) ||
              copy_exact(&c->slen, &slen_cap, t->slen, t->nstrings, sizeof *t->slen) ||
              copy_exact(&c->functions, &c->functions_cap, t->functions, t->nfunctions, sizeof *t->functions) ||
              copy_exact(&c->mappings, &c->mappings_cap, t->mappings, t->nmappings, sizeof *t->mappings) ||
              copy_exact(&c->locations, &c->locations_cap, t->locations, t->nlocations, sizeof *t->locations) ||
              copy_exact(&c->lines, &c->lines_cap, t->lines, t->nlines, sizeof *t->lines) ||
              copy_exact(&c->stacks, &c->stacks_cap, t->stacks, t->nstacks, sizeof *t->stacks) ||
              copy_exact(&c->fp[SYM_FP_STACKS], &c->fp_cap[SYM_FP_STACKS], t->fp[SYM_FP_STACKS], n, sizeof(sym_fp_t));
    if (bad) {
        symtab_free(c);
        return NULL;
    }
    return c;
}

size_t symtab_bytes(const symtab_t *t) {
    size_t fp = 0;
    for (int k = 0; k < 5; k++) fp += t->fp_cap[k] * sizeof(sym_fp_t);
    return fp + t->sdata_cap + t->strings_cap * 8 + t->functions_cap * sizeof(sym_function_t) +
           t->mappings_cap * sizeof(sym_mapping_t) + t->locations_cap * sizeof(sym_location_t) +
           t->lines_cap * sizeof(sym_line_t) + t->stacks_cap * sizeof(sym_stack_t) + idset_bytes(&t->set_strings) +
           idset_bytes(&t->set_functions) + idset_bytes(&t->set_mappings) + idset_bytes(&t->set_locations) +
           idset_bytes(&t->set_stacks);
}

/* ---- copying between symtabs ---- */

int symtab_remap_init(symtab_remap_t *m, const symtab_t *src) {
    m->src = src;
    m->strings = calloc(src->nstrings, sizeof *m->strings);
    m->functions = calloc(src->nfunctions, sizeof *m->functions);
    m->mappings = calloc(src->nmappings, sizeof *m->mappings);
    m->locations = calloc(src->nlocations, sizeof *m->locations);
    m->stacks = calloc(src->nstacks, sizeof *m->stacks);
    if (!m->strings || !m->functions || !m->mappings || !m->locations || !m->stacks) {
        symtab_remap_destroy(m);
        return -1;
    }
    return 0;
}

void symtab_remap_destroy(symtab_remap_t *m) {
    free(m->strings);
    free(m->functions);
    free(m->mappings);
    free(m->locations);
    free(m->stacks);
    memset(m, 0, sizeof *m);
}

static uint32_t import_string(symtab_t *dst, symtab_remap_t *m, uint32_t id) {
    if (id == 0) return 0;
    if (!m->strings[id]) m->strings[id] = symtab_string(dst, symtab_str(m->src, id), m->src->slen[id]);
    return m->strings[id];
}

static uint32_t import_function(symtab_t *dst, symtab_remap_t *m, uint32_t id) {
    if (id == 0) return 0;
    if (m->functions[id]) return m->functions[id];
    const sym_function_t *f = &m->src->functions[id];
    sym_function_t g = {import_string(dst, m, f->name), import_string(dst, m, f->system_name),
                        import_string(dst, m, f->filename), f->start_line};
    if (g.name == SYM_NONE || g.system_name == SYM_NONE || g.filename == SYM_NONE) return SYM_NONE;
    return m->functions[id] = symtab_function(dst, &g);
}

static uint32_t import_mapping(symtab_t *dst, symtab_remap_t *m, uint32_t id) {
    if (id == 0) return 0;
    if (m->mappings[id]) return m->mappings[id];
    sym_mapping_t g = m->src->mappings[id];
    g.filename = import_string(dst, m, g.filename);
    g.build_id = import_string(dst, m, g.build_id);
    if (g.filename == SYM_NONE || g.build_id == SYM_NONE) return SYM_NONE;
    return m->mappings[id] = symtab_mapping(dst, &g);
}

static uint32_t import_location(symtab_t *dst, symtab_remap_t *m, uint32_t id) {
    if (id == 0) return 0;
    if (m->locations[id]) return m->locations[id];
    const sym_location_t *l = &m->src->locations[id];
    sym_line_t small[16], *lines = small;
    if (l->nlines > 16 && !(lines = malloc(l->nlines * sizeof *lines))) return SYM_NONE;
    uint32_t out = SYM_NONE, mapping = import_mapping(dst, m, l->mapping);
    for (uint32_t i = 0; i < l->nlines; i++) {
        const sym_line_t *s = &m->src->lines[l->first_line + i];
        lines[i] = (sym_line_t){import_function(dst, m, s->function), s->line};
        if (lines[i].function == SYM_NONE) goto done;
    }
    if (mapping != SYM_NONE) out = m->locations[id] = symtab_location(dst, mapping, l->address, lines, l->nlines);
done:
    if (lines != small) free(lines);
    return out;
}

uint32_t symtab_import_stack(symtab_t *dst, symtab_remap_t *m, uint32_t src_stack) {
    assert(src_stack < m->src->nstacks);
    /* Walk up to the nearest already-imported ancestor, then intern downwards:
     * iterative, because real stacks can be thousands of frames deep. */
    uint32_t path[64], *p = path;
    size_t n = 0, cap = 64;
    uint32_t s = src_stack;
    while (s && !m->stacks[s]) {
        if (n == cap) {
            uint32_t *q = p == path ? malloc(cap * 2 * sizeof *q) : realloc(p, cap * 2 * sizeof *q);
            if (!q) goto fail;
            if (p == path) memcpy(q, path, sizeof path);
            p = q;
            cap *= 2;
        }
        p[n++] = s;
        s = m->src->stacks[s].parent;
    }
    uint32_t parent = s ? m->stacks[s] : 0;
    while (n) {
        uint32_t cur = p[--n];
        uint32_t loc = import_location(dst, m, m->src->stacks[cur].location);
        if (loc == SYM_NONE) goto fail;
        parent = symtab_stack(dst, parent, loc);
        if (parent == SYM_NONE) goto fail;
        m->stacks[cur] = parent;
    }
    if (p != path) free(p);
    return parent;
fail:
    if (p != path) free(p);
    return SYM_NONE;
}

/* ---- serialization ---- */

void symtab_encode(const symtab_t *t, buf_t *out) {
    buf_put_uvarint(out, t->nstrings - 1);
    for (size_t i = 1; i < t->nstrings; i++) buf_put_bytes(out, symtab_str(t, (uint32_t)i), t->slen[i]);
    buf_put_uvarint(out, t->nfunctions - 1);
    for (size_t i = 1; i < t->nfunctions; i++) {
        const sym_function_t *f = &t->functions[i];
        buf_put_uvarint(out, f->name);
        buf_put_uvarint(out, f->system_name);
        buf_put_uvarint(out, f->filename);
        buf_put_svarint(out, f->start_line);
    }
    buf_put_uvarint(out, t->nmappings - 1);
    for (size_t i = 1; i < t->nmappings; i++) {
        const sym_mapping_t *m = &t->mappings[i];
        buf_put_uvarint(out, m->start);
        buf_put_uvarint(out, m->limit);
        buf_put_uvarint(out, m->offset);
        buf_put_uvarint(out, m->filename);
        buf_put_uvarint(out, m->build_id);
    }
    buf_put_uvarint(out, t->nlocations - 1);
    for (size_t i = 1; i < t->nlocations; i++) {
        const sym_location_t *l = &t->locations[i];
        buf_put_uvarint(out, l->mapping);
        buf_put_uvarint(out, l->address);
        buf_put_uvarint(out, l->nlines);
        for (uint32_t j = 0; j < l->nlines; j++) {
            buf_put_uvarint(out, t->lines[l->first_line + j].function);
            buf_put_svarint(out, t->lines[l->first_line + j].line);
        }
    }
    /* A node's parent always precedes it, so (id - parent) is small and positive. */
    buf_put_uvarint(out, t->nstacks - 1);
    for (size_t i = 1; i < t->nstacks; i++) {
        assert(t->stacks[i].parent < i);
        buf_put_uvarint(out, i - t->stacks[i].parent);
        buf_put_uvarint(out, t->stacks[i].location);
    }
}

/* Sizes table k's array for n more entries before decoding them, so the decode
 * does not reallocate as it goes. 0 or -1 (OOM). */
static int reserve_table(symtab_t *t, int k, uint64_t n) {
    switch (k) {
    case SYM_FP_STRINGS: {
        size_t cap = t->strings_cap;
        if (VEC_RESERVE_EXACT(t->soff, cap, t->nstrings + n)) return -1;
        if (cap != t->strings_cap) { /* slen grows in step with soff */
            uint32_t *sl = realloc(t->slen, cap * sizeof *sl);
            if (!sl) return -1;
            t->slen = sl;
            t->strings_cap = cap;
        }
        return 0;
    }
    case SYM_FP_FUNCTIONS: return VEC_RESERVE_EXACT(t->functions, t->functions_cap, t->nfunctions + n);
    case SYM_FP_MAPPINGS: return VEC_RESERVE_EXACT(t->mappings, t->mappings_cap, t->nmappings + n);
    case SYM_FP_LOCATIONS: return VEC_RESERVE_EXACT(t->locations, t->locations_cap, t->nlocations + n);
    default: return VEC_RESERVE_EXACT(t->stacks, t->stacks_cap, t->nstacks + n);
    }
}

/* A table's entry count, which each entry's at least one byte bounds; the table is
 * then sized for it (reserve_table). */
static int decode_count(symtab_t *t, int k, buf_reader_t *r, uint64_t *n, hr_err_t *err, const char *what) {
    *n = buf_get_uvarint(r);
    if (r->bad || *n > buf_reader_left(r)) return hr_fail(err, HR_EUNPROC, "symbol table: bad %s count", what);
    if (reserve_table(t, k, *n)) return hr_fail(err, HR_ENOMEM, "out of memory");
    return 0;
}

#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        hr_fail(err, HR_EUNPROC, "symbol table: " __VA_ARGS__);                                                        \
        goto fail;                                                                                                     \
    } while (0)

/* Entries are appended as they come, with their references checked, and no sets
 * built: a block's symtab is only read (its entries were interned once when written;
 * a duplicate in a damaged file would cost space, never a wrong merge, since copies
 * intern by content). The sets are built on the first intern (index_sets). */
symtab_t *symtab_decode(const uint8_t *p, size_t len, hr_err_t *err) {
    symtab_t *t = symtab_new();
    if (!t) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    t->unindexed = 1;
    buf_reader_t r;
    buf_reader_init(&r, p, len);
    uint64_t n;
    if (vec_reserve_exact(&t->sdata, &t->sdata_cap, t->sdata_len + len, 1)) { /* len bounds every string */
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto fail;
    }
    if (decode_count(t, SYM_FP_STRINGS, &r, &n, err, "string")) goto fail;
    for (uint64_t i = 1; i <= n; i++) {
        size_t sl;
        const uint8_t *s = buf_get_bytes(&r, &sl);
        if (r.bad) BAD("truncated string %llu", (unsigned long long)i);
        memcpy(t->sdata + t->sdata_len, s, sl);
        t->sdata[t->sdata_len + sl] = 0;
        t->soff[t->nstrings] = (uint32_t)t->sdata_len;
        t->slen[t->nstrings++] = (uint32_t)sl;
        t->sdata_len += sl + 1;
    }
    char *fit = realloc(t->sdata, t->sdata_len); /* the rest of len was the other tables */
    if (fit) t->sdata = fit, t->sdata_cap = t->sdata_len;
    if (decode_count(t, SYM_FP_FUNCTIONS, &r, &n, err, "function")) goto fail;
    for (uint64_t i = 1; i <= n; i++) {
        sym_function_t *f = &t->functions[t->nfunctions];
        f->name = (uint32_t)buf_get_uvarint(&r);
        f->system_name = (uint32_t)buf_get_uvarint(&r);
        f->filename = (uint32_t)buf_get_uvarint(&r);
        f->start_line = buf_get_svarint(&r);
        if (r.bad || f->name >= t->nstrings || f->system_name >= t->nstrings || f->filename >= t->nstrings)
            BAD("bad function %llu", (unsigned long long)i);
        t->nfunctions++;
    }
    if (decode_count(t, SYM_FP_MAPPINGS, &r, &n, err, "mapping")) goto fail;
    for (uint64_t i = 1; i <= n; i++) {
        sym_mapping_t *m = &t->mappings[t->nmappings];
        m->start = buf_get_uvarint(&r);
        m->limit = buf_get_uvarint(&r);
        m->offset = buf_get_uvarint(&r);
        m->filename = (uint32_t)buf_get_uvarint(&r);
        m->build_id = (uint32_t)buf_get_uvarint(&r);
        if (r.bad || m->filename >= t->nstrings || m->build_id >= t->nstrings)
            BAD("bad mapping %llu", (unsigned long long)i);
        t->nmappings++;
    }
    if (decode_count(t, SYM_FP_LOCATIONS, &r, &n, err, "location")) goto fail;
    if (vec_reserve_exact(&t->lines, &t->lines_cap, n, sizeof *t->lines)) { /* most locations have one line */
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto fail;
    }
    for (uint64_t i = 1; i <= n; i++) {
        uint32_t mapping = (uint32_t)buf_get_uvarint(&r);
        uint64_t address = buf_get_uvarint(&r);
        uint64_t nl = buf_get_uvarint(&r);
        if (r.bad || mapping >= t->nmappings || nl > buf_reader_left(&r) || nl > UINT32_MAX - t->nlines)
            BAD("bad location %llu", (unsigned long long)i);
        if (VEC_RESERVE(t->lines, t->lines_cap, t->nlines + nl)) {
            hr_fail(err, HR_ENOMEM, "out of memory");
            goto fail;
        }
        t->locations[t->nlocations++] = (sym_location_t){mapping, address, (uint32_t)t->nlines, (uint32_t)nl};
        for (uint64_t j = 0; j < nl; j++, t->nlines++) {
            t->lines[t->nlines].function = (uint32_t)buf_get_uvarint(&r);
            t->lines[t->nlines].line = buf_get_svarint(&r);
            if (r.bad || t->lines[t->nlines].function >= t->nfunctions)
                BAD("bad line in location %llu", (unsigned long long)i);
        }
    }
    if (decode_count(t, SYM_FP_STACKS, &r, &n, err, "stack")) goto fail;
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t d = buf_get_uvarint(&r);
        uint64_t loc = buf_get_uvarint(&r);
        if (r.bad || d == 0 || d > i || loc == 0 || loc >= t->nlocations) BAD("bad stack %llu", (unsigned long long)i);
        t->stacks[t->nstacks++] = (sym_stack_t){(uint32_t)(i - d), (uint32_t)loc};
    }
    if (buf_reader_left(&r)) BAD("%zu trailing bytes", buf_reader_left(&r));
    return t;
fail:
    symtab_free(t);
    return NULL;
}
