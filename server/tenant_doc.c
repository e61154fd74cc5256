/* tenant_doc.c - see tenant_doc.h. */
#include "server/tenant_doc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/fsutil.h"
#include "remote/objstore.h"

static void doc_path(const app_t *a, const char *kind, const char *tenant, char *out, size_t cap) {
    if (a->objects) snprintf(out, cap, "%s/%s.json", kind, tenant);
    else snprintf(out, cap, "%s/%s/%s.json", a->cfg.data_dir, kind, tenant);
}

json_t *tenant_doc_load(app_t *a, const char *kind, const char *tenant, size_t max, hr_err_t *err) {
    char path[2400];
    doc_path(a, kind, tenant, path, sizeof path);
    buf_t b;
    buf_init(&b);
    int rc;
    if (a->objects) {
        rc = objstore_get(a->objects, path, max, &b, err);
    } else {
        uint8_t *data = NULL;
        size_t n = 0;
        rc = fs_read_file(path, max, &data, &n, err);
        if (rc == 0) buf_append(&b, data, n);
        free(data);
    }
    if (rc && err->code == HR_ENOTFOUND) {
        buf_free(&b);
        *err = (hr_err_t){0};
        json_t *o = json_object();
        if (!o) hr_fail(err, HR_ENOMEM, "out of memory");
        return o;
    }
    if (rc == 0 && b.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    json_t *doc = rc ? NULL : json_loadb((const char *)b.data, b.len, 0, NULL);
    buf_free(&b);
    if (rc == 0 && !json_is_object(doc)) {
        json_decref(doc);
        return hr_fail(err, HR_EIO, "%s of tenant %s: %s does not parse", kind, tenant, path), NULL;
    }
    return doc;
}

int tenant_doc_save(app_t *a, const char *kind, const char *tenant, const json_t *doc, hr_err_t *err) {
    char path[2400];
    doc_path(a, kind, tenant, path, sizeof path);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc;
    if (a->objects) {
        rc = objstore_put(a->objects, path, text, strlen(text), 0, err);
    } else {
        char dir[2400];
        snprintf(dir, sizeof dir, "%s/%s", a->cfg.data_dir, kind);
        rc = fs_mkdirs(dir, err) ? -1 : fs_write_atomic(path, text, strlen(text), err);
    }
    free(text);
    return rc;
}

/* A listed name "K/T.json" (or "T.json"): fn(T). */
typedef struct {
    tenant_doc_fn fn;
    void *ctx;
    const char *kind;
} lister_t;

static int listed(void *ctx, const char *key, uint64_t size) {
    (void)size;
    const lister_t *l = ctx;
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    size_t n = strlen(base);
    if (n <= 5 || strcmp(base + n - 5, ".json") || n - 5 >= 160) return 0;
    char tenant[160];
    memcpy(tenant, base, n - 5);
    tenant[n - 5] = 0;
    return l->fn(l->ctx, tenant);
}

int tenant_doc_list(app_t *a, const char *kind, tenant_doc_fn fn, void *ctx, hr_err_t *err) {
    lister_t l = {fn, ctx, kind};
    char path[2400];
    if (a->objects) {
        snprintf(path, sizeof path, "%s/", kind);
        return objstore_list(a->objects, path, listed, &l, err);
    }
    snprintf(path, sizeof path, "%s/%s", a->cfg.data_dir, kind);
    DIR *d = opendir(path);
    if (!d) return 0; /* none yet */
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) rc = listed(&l, e->d_name, 0);
    closedir(d);
    return rc;
}
