/* svg.c - the `svg` renderer: a flame graph as one self-contained SVG file, to paste
 * into an issue or a chat where no UI runs.
 *
 * Icicle layout, as the UI draws it: the root (`total`) on top, each node as wide as
 * its total, its children from the left after its own self, in name order. Frames
 * narrower than half a pixel are left out with their subtrees (their width still
 * counts in their parent). Each frame carries a <title> (name, value, share), which
 * browsers show on hover; no script, no external font or style. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "query/render.h"

#define SVG_WIDTH 1200.0
#define FRAME_H 16
#define TOP 24 /* room for the title line */

typedef struct {
    const tree_t *t;
    buf_t *body;
    const char *unit;
    double scale;    /* px per unit of value */
    int64_t *next_x; /* by depth: where the next node of that depth starts */
    size_t depth_cap, max_depth;
    int oom;
} svg_t;

/* Appends s with XML's special characters escaped. */
static void xml_str(buf_t *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': buf_printf(b, "&amp;"); break;
        case '<': buf_printf(b, "&lt;"); break;
        case '>': buf_printf(b, "&gt;"); break;
        case '"': buf_printf(b, "&quot;"); break;
        default: buf_putc(b, (uint8_t)*s);
        }
    }
}

/* A warm colour from the name, stable across renders. */
static void colour(const char *name, int *r, int *g, int *b) {
    uint64_t h = hash_bytes(name, strlen(name), 0);
    *r = 205 + (int)(h % 50), *g = 80 + (int)((h >> 8) % 120), *b = 40 + (int)((h >> 16) % 40);
}

static int visit(void *ctx, uint32_t node, size_t depth, int enter) {
    svg_t *c = ctx;
    const tree_node_t *n = &c->t->n[node];
    if (!enter) return 1;
    if (depth + 2 > c->depth_cap) {
        size_t cap = c->depth_cap * 2 + 16;
        int64_t *v = realloc(c->next_x, cap * sizeof *v);
        if (!v) return c->oom = 1, 0;
        memset(v + c->depth_cap, 0, (cap - c->depth_cap) * sizeof *v);
        c->next_x = v, c->depth_cap = cap;
    }
    int64_t x = depth ? c->next_x[depth] : 0;
    c->next_x[depth] = x + n->total;    /* the next sibling */
    c->next_x[depth + 1] = x + n->self; /* the first child, after this node's self */
    double w = (double)n->total * c->scale;
    if (w < 0.5) return 0;
    if (depth > c->max_depth) c->max_depth = depth;
    const char *name = tree_name(c->t, node);
    int r, g, b;
    colour(name, &r, &g, &b);
    double px = (double)x * c->scale, total = (double)c->t->n[0].total;
    buf_printf(c->body, "<g><title>");
    xml_str(c->body, name);
    buf_printf(
        c->body,
        " (%lld %s, %.2f%%)</title><rect x=\"%.1f\" y=\"%zu\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\"/>",
        (long long)n->total, c->unit, total > 0 ? 100.0 * (double)n->total / total : 0.0, px,
        (size_t)TOP + depth * FRAME_H, w, FRAME_H - 1, r, g, b);
    size_t fit = w > 6 ? (size_t)((w - 6) / 7) : 0; /* 12 px monospace: about 7 px a character */
    if (fit >= 3) {
        char label[256];
        size_t len = strlen(name);
        if (len > fit) snprintf(label, sizeof label, "%.*s..", (int)(fit - 2 < 250 ? fit - 2 : 250), name);
        else snprintf(label, sizeof label, "%s", name);
        buf_printf(c->body, "<text x=\"%.1f\" y=\"%zu\">", px + 3, (size_t)TOP + depth * FRAME_H + 12);
        xml_str(c->body, label);
        buf_printf(c->body, "</text>");
    }
    buf_printf(c->body, "</g>\n");
    return 1;
}

int render_svg(const tree_t *t, const merge_result_t *r, buf_t *out) {
    buf_t body;
    buf_init(&body);
    int64_t total = t->len ? t->n[0].total : 0;
    svg_t c = {.t = t, .body = &body, .unit = r->type.sample_unit, .scale = total > 0 ? SVG_WIDTH / (double)total : 0};
    int rc = total > 0 && tree_walk(t, visit, &c) ? -1 : 0;
    size_t height = (size_t)TOP + (c.max_depth + 1) * FRAME_H + 4;
    buf_printf(out,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%zu\" viewBox=\"0 0 %.0f %zu\" font-family=\"monospace\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n<text x=\"4\" y=\"16\">",
               SVG_WIDTH, height, SVG_WIDTH, height);
    xml_str(out, r->type_id);
    buf_printf(out, ": %lld %s, %llu profile%s</text>\n", (long long)total, r->type.sample_unit,
               (unsigned long long)r->profiles, r->profiles == 1 ? "" : "s");
    buf_append(out, body.data, body.len);
    buf_printf(out, "</svg>\n");
    if (body.oom || c.oom) rc = -1;
    buf_free(&body);
    free(c.next_x);
    return rc || out->oom ? -1 : 0;
}
