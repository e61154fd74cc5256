/* request.c - see request.h. */
#include "ingest/request.h"

#include <stdio.h>
#include <string.h>

#include "common/ptype.h"
#include "ingest/appname.h"
#include "ingest/format.h"

/* 2 added aux_body (then named prev_body), 3 added labels; every older version still replays. A record
 * is written in the oldest version that holds it (3 only with labels), so a binary
 * from before labels still replays what it can express. */
#define RECORD_VERSION 3

static void put_str(buf_t *b, const char *s) {
    if (!s) {
        buf_putc(b, 0);
        return;
    }
    buf_putc(b, 1);
    buf_put_bytes(b, s, strlen(s) + 1); /* keep the NUL so decode can borrow */
}

static const char *get_str(buf_reader_t *r) {
    const uint8_t *present = buf_get_raw(r, 1);
    if (!present || !*present) return NULL;
    size_t n;
    const uint8_t *s = buf_get_bytes(r, &n);
    if (!s || n == 0 || s[n - 1] != 0) {
        r->bad = 1;
        return NULL;
    }
    return (const char *)s;
}

/* The next label of a packed set from *off: 1 with k and v set, 0 at the end, -1
 * when the set is malformed (a name without a value, a string without its NUL). */
static int next_label(const char *p, size_t n, size_t *off, const char **k, const char **v) {
    if (*off >= n) return 0;
    const char *nul = memchr(p + *off, 0, n - *off);
    const char *vnul = nul ? memchr(nul + 1, 0, (size_t)(p + n - nul - 1)) : NULL;
    if (!vnul) return -1;
    *k = p + *off, *v = nul + 1;
    *off = (size_t)(vnul - p) + 1;
    return 1;
}

static int packed_labels_valid(const char *p, size_t n) {
    size_t off = 0;
    const char *k, *v;
    int rc;
    while ((rc = next_label(p, n, &off, &k, &v)) == 1) {
    }
    return rc == 0;
}

void ingest_labels_pack(const labels_t *l, buf_t *out) {
    for (size_t i = 0; i < l->n; i++) {
        buf_append(out, l->v[i].name, strlen(l->v[i].name) + 1);
        buf_append(out, l->v[i].value, strlen(l->v[i].value) + 1);
    }
}

void ingest_request_encode(const ingest_request_t *r, buf_t *b) {
    int version = r->labels ? 3 : 2;
    buf_putc(b, (uint8_t)version);
    put_str(b, r->tenant);
    put_str(b, r->name);
    buf_putc(b, (uint8_t)r->format);
    put_str(b, r->spy_name);
    put_str(b, r->sample_type_config);
    buf_putc(b, (uint8_t)(r->has_from | r->has_until << 1));
    buf_put_svarint(b, r->from_ns);
    buf_put_svarint(b, r->until_ns);
    buf_put_svarint(b, r->received_ns);
    buf_put_svarint(b, r->sample_rate);
    buf_put_bytes(b, r->body, r->body_len);
    buf_putc(b, r->aux_body != NULL);
    if (r->aux_body) buf_put_bytes(b, r->aux_body, r->aux_len);
    if (version >= 3) buf_put_bytes(b, r->labels, r->labels_len);
}

int ingest_request_decode(const uint8_t *p, size_t n, ingest_request_t *r, hr_err_t *err) {
    buf_reader_t rd;
    buf_reader_init(&rd, p, n);
    memset(r, 0, sizeof *r);
    const uint8_t *v = buf_get_raw(&rd, 1);
    if (!v || *v < 1 || *v > RECORD_VERSION) return hr_fail(err, HR_EUNPROC, "WAL record: unknown version");
    int version = *v;
    r->tenant = get_str(&rd);
    r->name = get_str(&rd);
    const uint8_t *f = buf_get_raw(&rd, 1);
    r->format = f ? (ingest_format_t)*f : 0;
    r->spy_name = get_str(&rd);
    r->sample_type_config = get_str(&rd);
    const uint8_t *flags = buf_get_raw(&rd, 1);
    r->has_from = flags && (*flags & 1);
    r->has_until = flags && (*flags & 2);
    r->from_ns = buf_get_svarint(&rd);
    r->until_ns = buf_get_svarint(&rd);
    r->received_ns = buf_get_svarint(&rd);
    r->sample_rate = buf_get_svarint(&rd);
    r->body = buf_get_bytes(&rd, &r->body_len);
    const uint8_t *has_prev = version >= 2 ? buf_get_raw(&rd, 1) : NULL;
    if (has_prev && *has_prev) r->aux_body = buf_get_bytes(&rd, &r->aux_len);
    if (version >= 3) {
        r->labels = (const char *)buf_get_bytes(&rd, &r->labels_len);
        if (r->labels && !packed_labels_valid(r->labels, r->labels_len)) rd.bad = 1;
    }
    if (rd.bad || !r->tenant || !r->name || !ingest_format_of(r->format))
        return hr_fail(err, HR_EUNPROC, "WAL record: malformed");
    return 0;
}

int ingest_label_add(labels_t *l, char *type_name, size_t cap, const char *k, const char *v, hr_err_t *err) {
    if (!k || !v) return hr_fail(err, HR_EINVAL, "push: a label needs a name and a value");
    if (!utf8_valid(v, strlen(v))) return hr_fail(err, HR_EINVAL, "push: label %s is not valid UTF-8", k);
    if (!strcmp(k, "__name__")) {
        snprintf(type_name, cap, "%s", v);
        return 0;
    }
    if (!strncmp(k, "__", 2)) return 0;
    if (!label_name_valid(k)) return hr_fail(err, HR_EINVAL, "push: invalid label name `%s`", k);
    if (labels_set(l, k, v)) return hr_fail(err, HR_ENOMEM, "out of memory");
    return 0;
}

int ingest_series_parse(const ingest_request_t *r, ingest_series_t *s, hr_err_t *err) {
    labels_init(&s->labels);
    s->type_name[0] = 0;
    if (!r->labels) return appname_parse(r->name, s->app, sizeof s->app, &s->labels, err);
    snprintf(s->app, sizeof s->app, "%s", "unknown_service"); /* as for a push series without one */
    size_t off = 0;
    const char *k, *v;
    int more;
    while ((more = next_label(r->labels, r->labels_len, &off, &k, &v)) == 1)
        if (ingest_label_add(&s->labels, s->type_name, sizeof s->type_name, k, v, err)) return -1;
    return more < 0 ? hr_fail(err, HR_EINVAL, "malformed label set") : 0;
}

int ingest_series_finish(const ingest_request_t *r, ingest_series_t *s, const ingest_limits_t *lim, hr_err_t *err) {
    if (!labels_get(&s->labels, "service_name") && labels_set(&s->labels, "service_name", s->app))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    if (r->spy_name && *r->spy_name && labels_set(&s->labels, "pyroscope_spy", r->spy_name))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    return ingest_check_labels(&s->labels, lim, err);
}

int ingest_series_read(const ingest_request_t *r, const ingest_limits_t *lim, ingest_series_t *s, hr_err_t *err) {
    if (ingest_series_parse(r, s, err)) return -1;
    return ingest_series_finish(r, s, lim, err);
}

int ingest_check_labels(const labels_t *l, const ingest_limits_t *lim, hr_err_t *err) {
    if (lim->max_labels && l->n > lim->max_labels)
        return hr_fail(err, HR_EINVAL, "a series has %zu labels, over the limit of %zu", l->n, lim->max_labels);
    for (size_t k = 0; lim->max_label_value_bytes && k < l->n; k++) {
        size_t nn = strlen(l->v[k].name), vn = strlen(l->v[k].value);
        if (nn > LABEL_NAME_MAX)
            return hr_fail(err, HR_EINVAL, "label name `%.40s...` is %zu bytes, over the limit of %d", l->v[k].name, nn,
                           LABEL_NAME_MAX);
        if (vn > lim->max_label_value_bytes)
            return hr_fail(err, HR_EINVAL,
                           "label %s has a %zu-byte value, over the limit of %zu (--max-label-value-bytes)",
                           l->v[k].name, vn, lim->max_label_value_bytes);
    }
    return 0;
}

/* Every series of every format passes here, whatever its decoder checked before. */
static int check_labels(const batch_t *b, const ingest_limits_t *lim, hr_err_t *err) {
    for (size_t i = 0; i < b->n; i++)
        if (ingest_check_labels(&b->p[i].labels, lim, err)) return -1;
    return 0;
}

/* A gauge (in-use memory, goroutines) is a level, and no part of a level is below
 * zero. Negative samples of one come from a writer that subtracted two snapshots
 * (Go's allocs?seconds=N delta carries inuse_* differences); kept, they make a
 * negative total and break the flame graph's layout. They are left out and counted
 * rather than refusing the upload, whose other types are sound. */
static void drop_negative_gauges(batch_t *b) {
    for (size_t i = 0; i < b->n; i++) {
        batch_profile_t *p = &b->p[i];
        ptype_parts_t parts;
        if (ptype_split(p->profile_type, &parts) || !ptype_is_gauge(&parts)) continue;
        size_t k = 0;
        for (size_t j = 0; j < p->n; j++) {
            if (p->values[j] < 0) continue;
            p->stacks[k] = p->stacks[j], p->values[k] = p->values[j];
            k++;
        }
        b->dropped_negative_gauge += p->n - k;
        p->n = k;
        k = 0;
        for (size_t j = 0; j < p->nspans; j++)
            if (p->spans[j].value >= 0) p->spans[k++] = p->spans[j]; /* copies of samples: counted above */
        p->nspans = k;
    }
}

/* Sums of a profile's values (per stack, per profile, per series over time) are
 * int64: values whose magnitudes add up past INT64_MAX would wrap into nonsense
 * (a negative CPU total), so such a profile is refused whole. */
static int check_values(const batch_t *b, hr_err_t *err) {
    for (size_t i = 0; i < b->n; i++) {
        int64_t sum = 0;
        for (size_t k = 0; k < b->p[i].n; k++) {
            int64_t v = b->p[i].values[k];
            if (v == INT64_MIN || __builtin_add_overflow(sum, v < 0 ? -v : v, &sum))
                return hr_fail(err, HR_EUNPROC, "sample values of %s add up past the 64-bit range",
                               b->p[i].profile_type);
        }
    }
    return 0;
}

int ingest_to_batch(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    const ingest_format_desc_t *f = ingest_format_of(r->format);
    if (!f) return hr_fail(err, HR_EINVAL, "unknown ingest format %d", (int)r->format);
    if (f->needs_body && !r->body_len) return hr_fail(err, HR_EUNPROC, "empty profile: the body holds no profile data");
    if (f->decode(r, lim, b, err) || check_labels(b, lim, err)) return -1;
    drop_negative_gauges(b);
    return check_values(b, err);
}
