/* tenant_doc.h - small per-tenant JSON documents: Drilldown's UI settings, the list
 * of a tenant's ad-hoc profiles.
 *
 * A document of kind K for tenant T is the file K/T.json in the data dir (written
 * atomically) on one node, and the object K/T.json in the object store in a cluster,
 * so every node reads the same. Callers serialize their own read-modify-write on one
 * node; between nodes the last write wins. */
#ifndef HEARTH_TENANT_DOC_H
#define HEARTH_TENANT_DOC_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"
#include "server/app.h"

/* The document (a new empty object when there is none), or NULL with err: HR_EIO
 * when it does not parse as an object or cannot be read, HR_ENOMEM. At most max
 * bytes are read. The caller owns the reference. */
json_t *tenant_doc_load(app_t *a, const char *kind, const char *tenant, size_t max, hr_err_t *err);
/* Calls fn with each tenant that has a document of kind. 0 or -1 with err. */
typedef int (*tenant_doc_fn)(void *ctx, const char *tenant);
int tenant_doc_list(app_t *a, const char *kind, tenant_doc_fn fn, void *ctx, hr_err_t *err);
/* Replaces the document. 0 or -1 with err. */
int tenant_doc_save(app_t *a, const char *kind, const char *tenant, const json_t *doc, hr_err_t *err);

#endif
