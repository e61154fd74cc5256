/* render.c - the renderer table and query_render, the one way a handler renders.
 *
 * A row says everything a handler needs to know about a format: its name, the
 * content type of the reply, what the merge must hold for it and the function that
 * writes it. Handlers look a row up by the name the client asked for, merge as the
 * row needs, and hand the merge to query_render, which builds the call trees when
 * the row reads them. So a new format is its own file and one row here; no handler
 * changes. The rows call the renderers through their direct APIs (render.h), which
 * the unit tests and the Connect querier use too. */
#include "query/render.h"

#include <assert.h>
#include <string.h>

#define JSON "application/json"

static int flamegraph(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_flamegraph(in->tree, in->args->m, in->args->max_nodes, in->args->groups, out);
}

static int top(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_top(in->tree, in->args->m, in->args->limit, out);
}

static int folded(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_folded(in->tree, out);
}

static int dataframe(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_dataframe(in->tree, in->args->m, out);
}

static int svg(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_svg(in->tree, in->args->m, out);
}

static int pprof(const render_input_t *in, buf_t *out, hr_err_t *err) { return render_pprof(in->args->m, out, err); }

static int dot(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_dot(in->tree, in->args->m, in->args->max_nodes, out);
}

static int diff(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    return render_diff(in->tree, in->args->m, in->right_tree, in->args->max_nodes, out);
}

/* The function a one-function view names, or NULL with err set. */
static const char *function_arg(const render_input_t *in, const char *format, hr_err_t *err) {
    const char *f = in->args->function;
    if (f && *f) return f;
    hr_fail(err, HR_EINVAL, "format=%s needs `function`, a function name as the top table shows it", format);
    return NULL;
}

static int lines(const render_input_t *in, buf_t *out, hr_err_t *err) {
    const char *f = function_arg(in, "lines", err);
    return f ? render_lines(in->args->m, f, out) : -1;
}

static int sandwich(const render_input_t *in, buf_t *out, hr_err_t *err) {
    const char *f = function_arg(in, "sandwich", err);
    return f ? render_sandwich(in->args->m, f, in->args->max_nodes, out, err) : -1;
}

static int source(const render_input_t *in, buf_t *out, hr_err_t *err) {
    const char *f = function_arg(in, "source", err);
    return f ? render_source(in->args->m, f, in->args->source, out) : -1;
}

static int timeseries(const render_input_t *in, buf_t *out, hr_err_t *err) {
    (void)err;
    render_timeseries(in->args->m, in->args->groups, out);
    return out->oom ? -1 : 0;
}

/* Within a kind, table order is the order render_names lists them in. */
static const renderer_t RENDERERS[] = {
    {"flamegraph", "json", RENDER_MERGE, RENDER_STACKS | RENDER_TIMELINE | RENDER_TREE, JSON, NULL, flamegraph},
    {"top", NULL, RENDER_MERGE, RENDER_STACKS | RENDER_TREE | RENDER_FUNCTIONS, JSON, NULL, top},
    {"folded", NULL, RENDER_MERGE, RENDER_STACKS | RENDER_TREE, "text/plain; charset=utf-8", NULL, folded},
    {"dataframe", NULL, RENDER_MERGE, RENDER_STACKS | RENDER_TREE, JSON, NULL, dataframe},
    {"pprof", NULL, RENDER_MERGE, RENDER_STACKS, "application/octet-stream", "attachment; filename=\"profile.pb.gz\"",
     pprof},
    {"svg", NULL, RENDER_MERGE, RENDER_STACKS | RENDER_TREE, "image/svg+xml", NULL, svg},
    {"dot", NULL, RENDER_MERGE, RENDER_STACKS | RENDER_TREE, "text/vnd.graphviz; charset=utf-8", NULL, dot},
    {"lines", NULL, RENDER_MERGE, RENDER_STACKS, JSON, NULL, lines},
    {"sandwich", NULL, RENDER_MERGE, RENDER_STACKS, JSON, NULL, sandwich},
    {"source", NULL, RENDER_MERGE, RENDER_STACKS, JSON, NULL, source},
    {"diff", NULL, RENDER_DIFF, RENDER_STACKS | RENDER_TREE, JSON, NULL, diff},
    {"timeseries", NULL, RENDER_TOTALS, RENDER_TIMELINE, JSON, NULL, timeseries},
};
#define NRENDERERS (sizeof RENDERERS / sizeof *RENDERERS)

const renderer_t *render_find(const char *name, render_kind_t kind) {
    for (size_t i = 0; i < NRENDERERS; i++) {
        const renderer_t *r = &RENDERERS[i];
        if (r->kind == kind && (!strcmp(name, r->name) || (r->alias && !strcmp(name, r->alias)))) return r;
    }
    return NULL;
}

void render_names(render_kind_t kind, buf_t *out) {
    size_t n = 0, k = 0;
    for (size_t i = 0; i < NRENDERERS; i++) n += RENDERERS[i].kind == kind;
    for (size_t i = 0; i < NRENDERERS; i++) {
        if (RENDERERS[i].kind != kind) continue;
        buf_printf(out, "%s%s", k == 0 ? "" : k + 1 == n ? " or " : ", ", RENDERERS[i].name);
        k++;
    }
}

int query_render(const renderer_t *r, const render_args_t *a, buf_t *out, hr_err_t *err) {
    int two = r->kind == RENDER_DIFF;
    assert(a->m && (!two || a->right));
    if (two && strcmp(a->m->type_id, a->right->type_id))
        return hr_fail(err, HR_EINVAL, "left and right must select the same profile type (%s vs %s)", a->m->type_id,
                       a->right->type_id);
    tree_t t = {0}, rt = {0};
    render_input_t in = {a, NULL, NULL};
    int rc = 0;
    if (r->needs & RENDER_TREE) {
        rc = tree_build(&t, a->m, err);
        if (rc == 0 && two) rc = tree_build(&rt, a->right, err);
        in.tree = &t, in.right_tree = two ? &rt : NULL;
    }
    if (rc == 0 && (rc = r->fn(&in, out, err)) && !err->code)
        hr_fail(err, HR_ENOMEM, "out of memory rendering %s", r->name);
    tree_destroy(&rt);
    tree_destroy(&t);
    return rc;
}
