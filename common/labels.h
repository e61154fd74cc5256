/* labels.h - label sets: the identity of a series.
 *
 * A series is a tenant, a profile type and a set of (name, value) labels. Sets are
 * kept sorted by name with unique names, so two equal sets have one canonical key
 * (used for interning) and one canonical JSON form. */
#ifndef HEARTH_LABELS_H
#define HEARTH_LABELS_H

#include <stddef.h>

#include "common/buf.h"

typedef struct {
    char *name, *value; /* owned by the set */
} label_t;

typedef struct {
    label_t *v;
    size_t n, cap;
} labels_t;

void labels_init(labels_t *l);
void labels_destroy(labels_t *l);
/* Sets name=value, replacing an existing value. Keeps the set sorted. 0 or -1 (OOM). */
int labels_set(labels_t *l, const char *name, const char *value);
/* Borrowed value of name, or NULL. */
const char *labels_get(const labels_t *l, const char *name);
/* Removes name's label, if there is one. */
void labels_del(labels_t *l, const char *name);
int labels_copy(labels_t *dst, const labels_t *src);
/* Keeps in a only the labels b holds with the same value (what both sets share). */
void labels_intersect(labels_t *a, const labels_t *b);
/* 1 when both sets hold the same names and values. */
int labels_equal(const labels_t *a, const labels_t *b);
/* Appends the canonical key: name \x01 value \x02 per label. */
void labels_key(const labels_t *l, buf_t *out);

/* Validation shared by every ingest path. */
int label_name_valid(const char *s); /* [A-Za-z_][A-Za-z0-9_.]* */
int utf8_valid(const char *s, size_t n);
/* Tenant ids name directories: 1-128 of [A-Za-z0-9_.-], not starting with '.'. */
int tenant_id_valid(const char *s);

#endif
