/* stackfilter.c - see stackfilter.h. */
#include "query/stackfilter.h"

#include <stdlib.h>
#include <string.h>

#include "common/vec.h"

enum { LOC_FOCUS = 1, LOC_IGNORE = 2, LOC_VISIBLE = 4 };
enum { RE_FOCUS, RE_IGNORE, RE_HIDE };

/* Function matches memoized per regex: a symtab has far fewer functions than
 * locations, and every location of a function asks the same question. */
typedef struct {
    const symtab_t *sym;
    int8_t *memo[3]; /* per function: -1 not yet asked, 0, 1 */
} matcher_t;

static int search(const hr_regex_t *re, const symtab_t *sym, uint32_t str) {
    const char *s = symtab_str(sym, str);
    return hr_regex_search(re, s, strlen(s));
}

static int function_matches(matcher_t *m, int k, const hr_regex_t *re, uint32_t f) {
    int8_t *v = &m->memo[k][f];
    if (*v < 0) {
        const sym_function_t *fn = &m->sym->functions[f];
        *v = (int8_t)(search(re, m->sym, fn->name) || search(re, m->sym, fn->filename));
    }
    return *v;
}

/* Mapping 0 is "no mapping": pprof checks only a mapping that is there. */
static int mapping_matches(const matcher_t *m, const hr_regex_t *re, const sym_location_t *loc) {
    return loc->mapping && search(re, m->sym, m->sym->mappings[loc->mapping].filename);
}

/* pprof's Location.matchesName: a line's function or file name, or the mapping's
 * file. *all: the location has nothing left once re's matches are removed. */
static int location_matches(matcher_t *m, int k, const hr_regex_t *re, const sym_location_t *loc, int *all) {
    int any = 0, every = loc->nlines > 0;
    for (uint32_t i = 0; i < loc->nlines; i++) {
        int hit = function_matches(m, k, re, m->sym->lines[loc->first_line + i].function);
        any |= hit, every &= hit;
    }
    int map = mapping_matches(m, re, loc);
    *all = map || every;
    return any || map;
}

static uint8_t location_class(matcher_t *m, const stackfilter_t *f, uint32_t l) {
    const sym_location_t *loc = &m->sym->locations[l];
    int all;
    uint8_t c = 0;
    if (f->ignore && location_matches(m, RE_IGNORE, f->ignore, loc, &all)) c |= LOC_IGNORE;
    else if (!f->focus || location_matches(m, RE_FOCUS, f->focus, loc, &all)) c |= LOC_FOCUS;
    if (!f->hide || !location_matches(m, RE_HIDE, f->hide, loc, &all) || !all) c |= LOC_VISIBLE;
    return c;
}

static int matcher_init(matcher_t *m, const symtab_t *sym) {
    m->sym = sym;
    size_t nf = sym->nfunctions ? sym->nfunctions : 1;
    for (int k = 0; k < 3; k++) {
        if (!(m->memo[k] = malloc(nf))) return -1;
        memset(m->memo[k], -1, nf);
    }
    return 0;
}

static void matcher_destroy(matcher_t *m) {
    for (int k = 0; k < 3; k++) free(m->memo[k]);
}

uint8_t *stackfilter_match(const symtab_t *sym, const stackfilter_t *f) {
    size_t n = sym->nstacks, nl = sym->nlocations;
    matcher_t m = {0};
    uint8_t *state = malloc(n ? n : 1), *cls = malloc(nl ? nl : 1), *out = malloc(n ? n : 1);
    int ok = state && cls && out && matcher_init(&m, sym) == 0;
    for (size_t l = 0; ok && l < nl; l++) cls[l] = location_class(&m, f, (uint32_t)l);
    for (size_t s = 0; ok && s < n; s++) {
        /* A stack is its parent's path plus one location; parents come first (symtab.h).
         * Stack 0, no locations, is dropped: pprof keeps only samples with a focused one. */
        const sym_stack_t *st = &sym->stacks[s];
        state[s] = s && st->parent < s ? (uint8_t)(state[st->parent] | cls[st->location]) : 0;
        out[s] = (state[s] & LOC_FOCUS) && !(state[s] & LOC_IGNORE) && (state[s] & LOC_VISIBLE);
    }
    matcher_destroy(&m);
    free(state);
    free(cls);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* Each location of sym (the first nl) with hide's frames removed: its own id when
 * nothing matched, 0 when nothing is left, else a new location appended to sym. */
static int hide_locations(matcher_t *m, symtab_t *sym, size_t nl, const hr_regex_t *hide, uint32_t *loc2) {
    sym_line_t *kept = NULL;
    size_t cap = 0;
    int rc = 0;
    loc2[0] = 0;
    for (size_t l = 1; l < nl && rc == 0; l++) {
        const sym_location_t loc = sym->locations[l]; /* a copy: interning may move the array */
        if (mapping_matches(m, hide, &loc)) {
            loc2[l] = 0;
            continue;
        }
        if (VEC_RESERVE(kept, cap, (size_t)loc.nlines + 1)) {
            rc = -1;
            break;
        }
        uint32_t nk = 0;
        for (uint32_t i = 0; i < loc.nlines; i++)
            if (!function_matches(m, RE_HIDE, hide, sym->lines[loc.first_line + i].function))
                kept[nk++] = sym->lines[loc.first_line + i];
        if (nk == loc.nlines) loc2[l] = (uint32_t)l;
        else if (nk == 0) loc2[l] = 0;
        else if ((loc2[l] = symtab_location(sym, loc.mapping, loc.address, kept, nk)) == SYM_NONE) rc = -1;
    }
    free(kept);
    return rc;
}

/* Grows v to at least need entries, zero-filled. 0 or -1. */
static int grow_zero(double **v, size_t *cap, size_t need) {
    size_t have = *cap;
    if (VEC_RESERVE(*v, *cap, need)) return -1;
    memset(*v + have, 0, (*cap - have) * sizeof **v);
    return 0;
}

int stackfilter_hide(symtab_t **symp, double **selfp, size_t *nselfp, size_t *self_cap, const hr_regex_t *hide) {
    symtab_t *sym = *symp, *out = symtab_new();
    size_t n = sym->nstacks, nl = sym->nlocations, cap = 0;
    matcher_t m = {0};
    uint32_t *loc2 = malloc((nl ? nl : 1) * sizeof *loc2), *nid = malloc((n ? n : 1) * sizeof *nid);
    double *self = NULL;
    symtab_remap_t rm;
    int have_rm = 0;
    int rc = out && loc2 && nid && matcher_init(&m, sym) == 0 ? 0 : -1;
    if (rc == 0) rc = hide_locations(&m, sym, nl, hide, loc2);
    /* Each stack re-interned without its hidden frames, in sym itself (parents first). */
    for (size_t s = 0; rc == 0 && s < n; s++) {
        const sym_stack_t st = sym->stacks[s];
        uint32_t p = s ? nid[st.parent] : 0, l = s ? loc2[st.location] : 0;
        nid[s] = l ? symtab_stack(sym, p, l) : p;
        if (nid[s] == SYM_NONE) rc = -1;
    }
    /* Then only the rewritten stacks that carry a value, copied into a fresh symtab. */
    if (rc == 0 && symtab_remap_init(&rm, sym) == 0) have_rm = 1;
    else rc = -1;
    for (size_t s = 0; rc == 0 && s < n && s < *nselfp; s++) {
        if ((*selfp)[s] == 0 || (s && !nid[s])) continue; /* no frame left: pprof drops the sample */
        uint32_t id = s ? symtab_import_stack(out, &rm, nid[s]) : 0;
        if (id == SYM_NONE || grow_zero(&self, &cap, out->nstacks)) {
            rc = -1;
            break;
        }
        self[id] += (*selfp)[s];
    }
    if (have_rm) symtab_remap_destroy(&rm);
    matcher_destroy(&m);
    free(loc2);
    free(nid);
    if (rc == 0 && grow_zero(&self, &cap, out->nstacks + 1)) rc = -1;
    if (rc) {
        symtab_free(out);
        free(self);
        return -1;
    }
    symtab_free(sym);
    free(*selfp);
    *symp = out, *selfp = self, *nselfp = out->nstacks, *self_cap = cap;
    return 0;
}
