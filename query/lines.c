/* lines.c - the `lines` renderer: one function's self and total by source line, as
 * `go tool pprof -list` counts them (without the source text, which Hearth does not
 * have) and as `-lines -top` lists them.
 *
 * A frame is one line of a location (inlined callees are frames of their own). A
 * sample's self goes to its innermost frame; its total goes once to every distinct
 * (file, line) of the function on its stack, so recursion counts once, as pprof's
 * cum does. The function is named as frames are (tree.h): its name, else its system
 * name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/vec.h"
#include "query/render.h"

typedef struct {
    uint32_t file; /* string id */
    int64_t line;
    double self, total;
    size_t seen;       /* the last stack that added to total (1-based) */
    uint32_t build_id; /* string id: of a location's mapping that holds the line (0: none) */
} line_row_t;

typedef struct {
    const symtab_t *sym;
    uint8_t *wanted; /* per function id */
    line_row_t *rows;
    size_t n, cap;
    double self, total;
} lines_t;

static const char *function_name(const symtab_t *sym, uint32_t f) {
    const sym_function_t *fn = &sym->functions[f];
    if (fn->name) return symtab_str(sym, fn->name);
    return fn->system_name ? symtab_str(sym, fn->system_name) : "?";
}

/* The row of (file, line), added when new; NULL on OOM. Few rows per function: a
 * linear search. */
static line_row_t *row_of(lines_t *c, uint32_t file, int64_t line) {
    for (size_t i = 0; i < c->n; i++)
        if (c->rows[i].file == file && c->rows[i].line == line) return &c->rows[i];
    if (VEC_RESERVE(c->rows, c->cap, c->n + 1)) return NULL;
    c->rows[c->n] = (line_row_t){file, line, 0, 0, 0, 0};
    return &c->rows[c->n++];
}

/* Adds stack s (value v, the k-th stack with a value) to the rows. 0 or -1. */
static int add_stack(lines_t *c, uint32_t s, double v, size_t k) {
    int leaf = 1, on = 0;
    for (; s; s = c->sym->stacks[s].parent) {
        const sym_location_t *loc = &c->sym->locations[c->sym->stacks[s].location];
        for (uint32_t i = 0; i < loc->nlines; i++, leaf = 0) {
            const sym_line_t *l = &c->sym->lines[loc->first_line + i];
            if (!c->wanted[l->function]) continue;
            line_row_t *r = row_of(c, c->sym->functions[l->function].filename, l->line);
            if (!r) return -1;
            if (!r->build_id && loc->mapping) r->build_id = c->sym->mappings[loc->mapping].build_id;
            if (leaf) r->self += v, c->self += v;
            if (r->seen != k) r->total += v, r->seen = k;
            on = 1;
        }
        if (loc->nlines == 0) leaf = 0;
    }
    if (on) c->total += v;
    return 0;
}

static int cmp_row(const void *a, const void *b, void *ctx) {
    const symtab_t *sym = ctx;
    const line_row_t *x = a, *y = b;
    int f = strcmp(symtab_str(sym, x->file), symtab_str(sym, y->file));
    if (f) return f;
    return (x->line > y->line) - (x->line < y->line);
}

/* The function's rows, sorted by file and line, into c (the caller frees c->wanted
 * and c->rows). 0 or -1 (OOM). */
static int collect(const merge_result_t *r, const char *function, lines_t *c) {
    const symtab_t *sym = r->sym;
    *c = (lines_t){sym, calloc(sym->nfunctions ? sym->nfunctions : 1, 1), NULL, 0, 0, 0, 0};
    int rc = c->wanted ? 0 : -1;
    for (size_t f = 1; rc == 0 && f < sym->nfunctions; f++)
        c->wanted[f] = !strcmp(function_name(sym, (uint32_t)f), function);
    for (size_t s = 1, k = 0; rc == 0 && s < r->nself && s < sym->nstacks; s++)
        if (r->self[s] != 0) rc = add_stack(c, (uint32_t)s, r->self[s], ++k);
    if (rc == 0 && c->n) qsort_r(c->rows, c->n, sizeof *c->rows, cmp_row, (void *)sym); /* qsort(NULL, 0) is UB */
    return rc;
}

int render_lines(const merge_result_t *r, const char *function, buf_t *out) {
    const symtab_t *sym = r->sym;
    lines_t c;
    int rc = collect(r, function, &c);
    if (rc == 0) {
        buf_append(out, "{\"function\":", 12);
        jsonw_str(out, function);
        buf_printf(out, "%s", ",\"lines\":[");
        for (size_t i = 0; i < c.n; i++) {
            buf_printf(out, "%s", i ? ",{\"file\":" : "{\"file\":");
            jsonw_str(out, symtab_str(sym, c.rows[i].file));
            buf_printf(out, ",\"line\":%lld,\"self\":%lld,\"total\":%lld}", (long long)c.rows[i].line,
                       (long long)llround(c.rows[i].self), (long long)llround(c.rows[i].total));
        }
        buf_printf(out, "],\"self\":%lld,\"total\":%lld,\"unit\":", (long long)llround(c.self),
                   (long long)llround(c.total));
        jsonw_str(out, r->type.sample_unit);
        buf_putc(out, '}');
    }
    free(c.wanted);
    free(c.rows);
    return rc || out->oom ? -1 : 0;
}

/* The file of the function's rows with the largest total (its definition, mostly:
 * inlined callees are rows of their own files under their own names). */
static size_t main_file(const lines_t *c) {
    size_t best = 0;
    double best_total = -1;
    for (size_t a = 0, b; a < c->n; a = b) {
        double t = 0;
        for (b = a; b < c->n && c->rows[b].file == c->rows[a].file; b++) t += c->rows[b].total;
        if (t > best_total) best_total = t, best = a;
    }
    return best;
}

/* The row of line n of the file starting at rows[a], or NULL. */
static const line_row_t *row_at(const lines_t *c, size_t a, int64_t n) {
    for (size_t i = a; i < c->n && c->rows[i].file == c->rows[a].file; i++)
        if (c->rows[i].line == n) return &c->rows[i];
    return NULL;
}

static void source_line(buf_t *out, int64_t n, const char *text, size_t len, const line_row_t *row, int first) {
    buf_printf(out, "%s{\"line\":%lld,\"text\":", first ? "" : ",", (long long)n);
    if (text) jsonw_strn(out, text, len);
    else buf_printf(out, "null");
    buf_printf(out, ",\"self\":%lld,\"total\":%lld}", row ? (long long)llround(row->self) : 0LL,
               row ? (long long)llround(row->total) : 0LL);
}

int render_source(const merge_result_t *r, const char *function, const source_fetch_t *src, buf_t *out) {
    lines_t c;
    int rc = collect(r, function, &c);
    size_t a = rc == 0 && c.n ? main_file(&c) : 0;
    const char *file = c.n ? symtab_str(r->sym, c.rows[a].file) : "";
    const char *id = "";
    for (size_t i = a; i < c.n && c.rows[i].file == c.rows[a].file && !*id; i++)
        if (c.rows[i].build_id) id = symtab_str(r->sym, c.rows[i].build_id);
    buf_t text;
    buf_init(&text);
    char why[256] = "the function has no lines in this profile";
    const char *origin =
        rc == 0 && c.n && src && src->fetch ? src->fetch(src->ctx, id, file, &text, why, sizeof why) : NULL;
    if (rc == 0) {
        buf_append(out, "{\"function\":", 12);
        jsonw_str(out, function);
        buf_printf(out, ",\"file\":");
        jsonw_str(out, file);
        buf_printf(out, ",\"buildId\":");
        jsonw_str(out, id);
        buf_printf(out, ",\"origin\":");
        if (origin) jsonw_str(out, origin);
        else buf_printf(out, "null,\"error\":"), jsonw_str(out, why);
        buf_printf(out, ",\"lines\":[");
        if (origin) { /* every line of the file, with its numbers */
            const char *p = (const char *)text.data, *end = p + text.len;
            for (int64_t n = 1; p < end; n++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                source_line(out, n, p, len, row_at(&c, a, n), n == 1);
                p += len + (nl != NULL);
            }
        } else { /* the lines that have values, without their text */
            for (size_t i = a; i < c.n && c.rows[i].file == c.rows[a].file; i++)
                source_line(out, c.rows[i].line, NULL, 0, &c.rows[i], i == a);
        }
        buf_printf(out, "],\"self\":%lld,\"total\":%lld,\"unit\":", (long long)llround(c.self),
                   (long long)llround(c.total));
        jsonw_str(out, r->type.sample_unit);
        buf_putc(out, '}');
    }
    buf_free(&text);
    free(c.wanted);
    free(c.rows);
    return rc || out->oom ? -1 : 0;
}
