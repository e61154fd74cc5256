/* pprof_edit.c - see pprof_edit.h. */
#include "ingest/pprof_edit.h"

#include <stdlib.h>
#include <string.h>

#include "wire/gzip.h"
#include "wire/profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile_t;

static int kept(const pb_profile_t *p, const Perftools__Profiles__ValueType *v, const char *const *keep, size_t nkeep) {
    if (!v || v->type < 0 || (size_t)v->type >= p->n_string_table) return 0;
    for (size_t i = 0; i < nkeep; i++)
        if (!strcmp(p->string_table[v->type], keep[i])) return 1;
    return 0;
}

/* Moves the kept sample types to the front (a permutation, so protobuf-c still
 * frees every one) and compacts each sample's values to match. Returns how many
 * types are kept; pos[0..kept) are their old positions. */
static size_t keep_in_place(pb_profile_t *p, const char *const *keep, size_t nkeep, size_t *pos) {
    size_t n = p->n_sample_type, k = 0;
    for (size_t i = 0; i < n; i++)
        if (kept(p, p->sample_type[i], keep, nkeep)) pos[k++] = i;
    if (k == 0 || k == n) return k;
    for (size_t j = 0; j < k; j++) { /* pos is increasing, so pos[j] >= j: swapping keeps the order */
        Perftools__Profiles__ValueType *t = p->sample_type[j];
        p->sample_type[j] = p->sample_type[pos[j]];
        p->sample_type[pos[j]] = t;
    }
    for (size_t s = 0; s < p->n_sample; s++) {
        Perftools__Profiles__Sample *sm = p->sample[s];
        if (sm->n_value != n) continue;
        for (size_t j = 0; j < k; j++) sm->value[j] = sm->value[pos[j]];
        sm->n_value = k;
    }
    return k;
}

static int pack(const pb_profile_t *p, buf_t *out, hr_err_t *err) {
    size_t len = perftools__profiles__profile__get_packed_size(p);
    if (buf_reserve(out, len)) return hr_fail(err, HR_ENOMEM, "out of memory");
    perftools__profiles__profile__pack(p, out->data + out->len);
    out->len += len;
    return 0;
}

int pprof_keep_types(const uint8_t *in, size_t n, size_t max, const char *const *keep, size_t nkeep, buf_t *out,
                     hr_err_t *err) {
    uint8_t *raw = NULL;
    if (gz_is_gzip(in, n)) {
        if (gz_inflate(in, n, max, &raw, &n, err)) return -1;
        in = raw;
    } else if (n > max) {
        return hr_fail(err, HR_ETOOBIG, "profile exceeds the limit of %zu bytes", max);
    }
    pb_profile_t *p = perftools__profiles__profile__unpack(NULL, n, in);
    free(raw);
    if (!p) return hr_fail(err, HR_EUNPROC, "not a pprof profile: the body does not parse as profile.proto");
    size_t ntypes = p->n_sample_type, *pos = malloc((ntypes + 1) * sizeof *pos);
    int rc = pos ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    size_t k = rc ? 0 : keep_in_place(p, keep, nkeep, pos);
    if (rc == 0 && k == 0)
        rc = hr_fail(err, HR_EUNPROC, "the profile has none of the expected sample types (%s%s)", nkeep ? keep[0] : "",
                     nkeep > 1 ? ", ..." : "");
    p->n_sample_type = k;
    if (rc == 0) rc = pack(p, out, err);
    p->n_sample_type = ntypes; /* so free_unpacked frees the dropped ones too */
    perftools__profiles__profile__free_unpacked(p, NULL);
    free(pos);
    return rc;
}
