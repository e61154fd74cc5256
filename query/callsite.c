/* callsite.c - see callsite.h. */
#include "query/callsite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAILED UINT32_MAX /* a frame differed from the call site */

/* A line's frame name as tree.c names it: the function name, else its system
 * name, else "?". Read-only: a segment's symtab is shared with other queries. */
static const char *line_name(const symtab_t *sym, const sym_line_t *l) {
    const sym_function_t *f = &sym->functions[l->function];
    if (f->name) return symtab_str(sym, f->name);
    if (f->system_name) return symtab_str(sym, f->system_name);
    return "?";
}

/* Advances k (call-site frames matched so far) over one frame. */
static uint32_t step(const callsite_t *cs, uint32_t k, const char *frame) {
    if (k == FAILED || k == cs->n) return k; /* decided: deeper frames do not matter */
    return strcmp(frame, cs->names[k]) ? FAILED : k + 1;
}

/* Advances k over every frame of a location, outermost (root side) first. */
static uint32_t advance(const symtab_t *sym, const callsite_t *cs, uint32_t k, uint32_t location) {
    const sym_location_t *loc = &sym->locations[location];
    if (loc->nlines == 0) {
        char addr[32];
        snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)loc->address);
        return step(cs, k, addr);
    }
    for (uint32_t i = loc->nlines; i-- > 0 && k != FAILED && k != cs->n;)
        k = step(cs, k, line_name(sym, &sym->lines[loc->first_line + i]));
    return k;
}

uint8_t *callsite_match(const symtab_t *sym, const callsite_t *cs) {
    size_t n = sym->nstacks;
    uint32_t *state = malloc((n ? n : 1) * sizeof *state);
    uint8_t *out = malloc(n ? n : 1);
    if (!state || !out) {
        free(state);
        free(out);
        return NULL;
    }
    for (size_t s = 0; s < n; s++) {
        const sym_stack_t *st = &sym->stacks[s];
        /* Stack 0 is the empty stack; every other one's parent has a smaller id
         * (interned first; symtab_decode stores it as a positive delta). */
        if (s == 0) state[s] = 0;
        else state[s] = st->parent < s ? advance(sym, cs, state[st->parent], st->location) : FAILED;
        out[s] = state[s] == cs->n;
    }
    free(state);
    return out;
}
