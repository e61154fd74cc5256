/* index.c - see index.h. */
#include "catalog/index.h"

#include <assert.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/vec.h"
#include "catalog/backend.h"

struct index {
    const index_backend_t *ops;
    void *db;
    pthread_mutex_t mu;    /* the mirror: series, set, counts, synced, version */
    pthread_mutex_t db_mu; /* db: one backend call at a time; innermost (taken under mu too) */
    series_t **series;     /* by id (NULL where none, or not yet synced); [0] unused */
    size_t nseries, series_cap;
    idset_t set;
    uint32_t synced; /* shared catalogs: every series id <= this is in the mirror */
    int64_t version; /* shared catalogs: the catalog version whose series are all in the mirror */
    size_t max_per_tenant;
    struct tenant_count {
        char tenant[129];
        size_t n;
    } * counts; /* series per tenant */
    size_t ncounts, counts_cap;
};

typedef struct {
    const char *tenant, *ptype;
    const labels_t *labels;
} series_key_t;

static uint64_t key_hash(const char *tenant, const char *ptype, const labels_t *l) {
    uint64_t h = hash_bytes(tenant, strlen(tenant), 1);
    h = hash_bytes(ptype, strlen(ptype), h);
    for (size_t i = 0; i < l->n; i++) {
        h = hash_bytes(l->v[i].name, strlen(l->v[i].name), h);
        h = hash_bytes(l->v[i].value, strlen(l->v[i].value), h ^ 0x5bd1e995);
    }
    return h;
}

static int key_eq(const void *ctx, uint32_t id, const void *key) {
    const index_t *ix = ctx;
    const series_key_t *k = key;
    const series_t *s = ix->series[id];
    if (strcmp(s->tenant, k->tenant) || strcmp(s->profile_type, k->ptype) || s->labels.n != k->labels->n) return 0;
    for (size_t i = 0; i < s->labels.n; i++)
        if (strcmp(s->labels.v[i].name, k->labels->v[i].name) || strcmp(s->labels.v[i].value, k->labels->v[i].value))
            return 0;
    return 1;
}

static void series_free(series_t *s) {
    if (!s) return;
    free(s->tenant);
    free(s->profile_type);
    labels_destroy(&s->labels);
    free(s);
}

/* The series counter of a tenant (created at 0); NULL on OOM. Call with mu held;
 * tenants are few, so a linear search is enough. */
static size_t *tenant_count(index_t *ix, const char *tenant) {
    for (size_t i = 0; i < ix->ncounts; i++)
        if (!strcmp(ix->counts[i].tenant, tenant)) return &ix->counts[i].n;
    if (VEC_RESERVE(ix->counts, ix->counts_cap, ix->ncounts + 1)) return NULL;
    struct tenant_count *c = &ix->counts[ix->ncounts++];
    snprintf(c->tenant, sizeof c->tenant, "%s", tenant);
    c->n = 0;
    return &c->n;
}

/* A series for the in-memory mirror, with the mirror's room for it made: everything
 * that allocates, done before the series is persisted, so that out of memory leaves
 * it in neither SQLite nor the mirror. NULL on OOM. Call with mu held. */
static series_t *mirror_prepare(index_t *ix, uint32_t id, const char *tenant, const char *ptype,
                                const labels_t *labels) {
    series_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    s->tenant = strdup(tenant);
    s->profile_type = strdup(ptype);
    if (!s->tenant || !s->profile_type || labels_copy(&s->labels, labels) ||
        VEC_RESERVE(ix->series, ix->series_cap, (size_t)id + 1) || !tenant_count(ix, tenant) ||
        idset_reserve(&ix->set, ix->set.len + 1)) {
        series_free(s);
        return NULL;
    }
    return s;
}

/* Adds a prepared series to the mirror; allocates nothing. Call with mu held. */
static void mirror_publish(index_t *ix, series_t *s) {
    while (ix->nseries <= s->id) ix->series[ix->nseries++] = NULL;
    ix->series[s->id] = s;
    (*tenant_count(ix, s->tenant))++;
    int rc = idset_add(&ix->set, key_hash(s->tenant, s->profile_type, &s->labels), s->id);
    assert(rc == 0); /* idset_reserve made the room */
    (void)rc;
}

/* Adds a series to the in-memory mirror (not to SQLite). */
static int mirror_add(index_t *ix, uint32_t id, const char *tenant, const char *ptype, const labels_t *labels) {
    series_t *s = mirror_prepare(ix, id, tenant, ptype, labels);
    if (!s) return -1;
    mirror_publish(ix, s);
    return 0;
}

static int labels_from_json(const char *text, labels_t *out) {
    json_t *o = json_loads(text, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach(o, k, v) {
        if (!json_is_string(v) || labels_set(out, k, json_string_value(v))) rc = -1;
    }
    json_decref(o);
    return rc;
}

/* Adds a stored series to the mirror unless it is there already (index_row_fn). */
static int load_row(void *ctx, uint32_t id, const char *tenant, const char *ptype, const char *json) {
    index_t *ix = ctx;
    if (id < ix->nseries && ix->series[id]) return 0;
    labels_t l;
    labels_init(&l);
    int rc = labels_from_json(json, &l) || mirror_add(ix, id, tenant, ptype, &l) ? -1 : 0;
    labels_destroy(&l);
    if (id > ix->synced) ix->synced = id;
    return rc;
}

/* Makes an index over a backend: its series loaded into the mirror. */
static index_t *index_new(const index_backend_t *ops, void *db, hr_err_t *err) {
    index_t *ix = calloc(1, sizeof *ix);
    if (!ix) {
        ops->close(db);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    ix->ops = ops;
    ix->db = db;
    ix->version = -1;
    pthread_mutex_init(&ix->mu, NULL);
    pthread_mutex_init(&ix->db_mu, NULL);
    idset_init(&ix->set);
    ix->nseries = 1; /* id 0 is never a series */
    if (VEC_RESERVE(ix->series, ix->series_cap, 1)) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        goto fail;
    }
    ix->series[0] = NULL;
    if (ops->series_since(db, 0, load_row, ix, err)) goto fail;
    return ix;
fail:
    index_close(ix);
    return NULL;
}

index_t *index_open(const char *path, hr_err_t *err) {
    const index_backend_t *ops;
    void *db = index_sqlite_open(path, 0, &ops, err);
    return db ? index_new(ops, db, err) : NULL;
}

index_t *index_open_readonly(const char *path, hr_err_t *err) {
    const index_backend_t *ops;
    void *db = index_sqlite_open(path, 1, &ops, err);
    return db ? index_new(ops, db, err) : NULL;
}

index_t *index_open_pg(const index_pg_config_t *cfg, hr_err_t *err) {
    const index_backend_t *ops;
    void *db = index_pg_open(cfg, &ops, err);
    return db ? index_new(ops, db, err) : NULL;
}

int index_shared(index_t *ix) { return ix->ops->version != NULL; }

void index_close(index_t *ix) {
    if (!ix) return;
    for (size_t i = 0; i < ix->nseries; i++) series_free(ix->series[i]);
    free(ix->series);
    free(ix->counts);
    idset_free(&ix->set);
    ix->ops->close(ix->db);
    pthread_mutex_destroy(&ix->mu);
    pthread_mutex_destroy(&ix->db_mu);
    free(ix);
}

static char *labels_json(const labels_t *l) {
    json_t *o = json_object();
    for (size_t i = 0; i < l->n; i++) json_object_set_new(o, l->v[i].name, json_string(l->v[i].value));
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return text;
}

/* Stores a series the mirror lacks and publishes it there; mu held. Everything that
 * allocates is done before the series is stored, so out of memory leaves it in
 * neither. A shared catalog may answer another id than proposed (another node made
 * the series, or took that id): the mirror entry is then made again for it. */
static int add_series(index_t *ix, const char *tenant, const char *ptype, const labels_t *labels, uint32_t *id,
                      hr_err_t *err) {
    uint32_t proposed = (uint32_t)ix->nseries;
    series_t *s = mirror_prepare(ix, proposed, tenant, ptype, labels);
    char *json = s ? labels_json(labels) : NULL;
    if (!json) {
        series_free(s);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&ix->db_mu);
    int rc = ix->ops->add_series(ix->db, proposed, tenant, ptype, labels, json, id, err);
    pthread_mutex_unlock(&ix->db_mu);
    free(json);
    if (rc == 0 && *id != proposed) {
        series_free(s);
        if (*id < ix->nseries && ix->series[*id]) return 0; /* synced meanwhile */
        if (!(s = mirror_prepare(ix, *id, tenant, ptype, labels))) return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    if (rc) series_free(s);
    else mirror_publish(ix, s);
    return rc;
}

void index_set_series_limit(index_t *ix, size_t max) {
    pthread_mutex_lock(&ix->mu);
    ix->max_per_tenant = max;
    pthread_mutex_unlock(&ix->mu);
}

static size_t tenant_series(index_t *ix, const char *tenant) {
    size_t *n = tenant_count(ix, tenant);
    return n ? *n : 0;
}

int index_series(index_t *ix, const char *tenant, const char *ptype, const labels_t *labels, uint32_t *id,
                 hr_err_t *err) {
    series_key_t k = {tenant, ptype, labels};
    uint64_t h = key_hash(tenant, ptype, labels);
    pthread_mutex_lock(&ix->mu);
    uint32_t found = idset_find(&ix->set, h, &k, key_eq, ix);
    int rc = 0;
    if (found == UINT32_MAX && ix->max_per_tenant && tenant_series(ix, tenant) >= ix->max_per_tenant) {
        rc = hr_fail(err, HR_ELIMIT, "tenant %s is at its limit of %zu series (--max-series-per-tenant)", tenant,
                     ix->max_per_tenant);
    } else if (found == UINT32_MAX) {
        rc = add_series(ix, tenant, ptype, labels, &found, err);
    }
    pthread_mutex_unlock(&ix->mu);
    *id = found;
    return rc;
}

int index_sync(index_t *ix, int64_t *version, hr_err_t *err) {
    *version = 0;
    if (!ix->ops->version) return 0;
    pthread_mutex_lock(&ix->mu);
    pthread_mutex_lock(&ix->db_mu);
    int rc = ix->ops->version(ix->db, version, err);
    if (rc == 0 && *version != ix->version) {
        rc = ix->ops->series_since(ix->db, ix->synced, load_row, ix, err); /* load_row fills the mirror: mu held */
        if (rc == 0) ix->version = *version;
    }
    pthread_mutex_unlock(&ix->db_mu);
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

int index_snapshot(index_t *ix, const char *tenant, index_snapshot_t *out, hr_err_t *err) {
    size_t cap = 0;
    int rc = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&ix->mu);
    for (size_t i = 1; i < ix->nseries && rc == 0; i++) {
        const series_t *s = ix->series[i];
        if (!s || strcmp(s->tenant, tenant)) continue;
        if (VEC_RESERVE(out->v, cap, out->n + 1)) rc = hr_fail(err, HR_ENOMEM, "out of memory listing series");
        else out->v[out->n++] = s;
    }
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

void index_snapshot_free(index_snapshot_t *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

size_t index_series_total(index_t *ix) {
    pthread_mutex_lock(&ix->mu);
    size_t n = ix->set.len;
    pthread_mutex_unlock(&ix->mu);
    return n;
}

uint32_t index_series_bound(index_t *ix) {
    pthread_mutex_lock(&ix->mu);
    uint32_t n = (uint32_t)ix->nseries;
    pthread_mutex_unlock(&ix->mu);
    return n;
}

/* The calls below only pass through to the backend, one at a time, with the mirror
 * free for ingest meanwhile. */
#define LOCKED(ix, call)                                                                                               \
    do {                                                                                                               \
        pthread_mutex_lock(&(ix)->db_mu);                                                                              \
        int rc_ = (call);                                                                                              \
        pthread_mutex_unlock(&(ix)->db_mu);                                                                            \
        return rc_;                                                                                                    \
    } while (0)

static int unshared(hr_err_t *err) { return hr_fail(err, HR_EINVAL, "not a shared catalog (--catalog)"); }

int index_blocks(index_t *ix, block_meta_t **out, size_t *n, hr_err_t *err) {
    LOCKED(ix, ix->ops->blocks(ix->db, out, n, err));
}

int index_block_changes(index_t *ix, int64_t since, int64_t upto, block_meta_t **added, size_t *nadd, int64_t **removed,
                        size_t *nrem, int *complete, hr_err_t *err) {
    *added = NULL, *removed = NULL, *nadd = *nrem = 0, *complete = 0;
    if (!ix->ops->block_changes) return 0; /* no log: the caller reads the whole list */
    LOCKED(ix, ix->ops->block_changes(ix->db, since, upto, added, nadd, removed, nrem, complete, err));
}

int index_prune_log(index_t *ix, int64_t keep, hr_err_t *err) {
    if (!ix->ops->prune_log) return 0;
    LOCKED(ix, ix->ops->prune_log(ix->db, keep, err));
}

int index_next_block_id(index_t *ix, int64_t *id, hr_err_t *err) {
    LOCKED(ix, ix->ops->next_block_id(ix->db, id, err));
}

uint32_t index_wal_checkpoint(index_t *ix) {
    pthread_mutex_lock(&ix->db_mu);
    uint32_t c = ix->ops->wal_checkpoint ? ix->ops->wal_checkpoint(ix->db) : 0;
    pthread_mutex_unlock(&ix->db_mu);
    return c;
}

int index_replace_blocks(index_t *ix, const block_meta_t *merged, size_t nmerged, const int64_t *ids, size_t n,
                         hr_err_t *err) {
    LOCKED(ix, ix->ops->replace_blocks(ix->db, merged, nmerged, ids, n, err));
}

int index_commit_blocks(index_t *ix, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err) {
    LOCKED(ix, ix->ops->commit_blocks(ix->db, b, n, wal_segment, err));
}

int index_remove_blocks(index_t *ix, const int64_t *ids, size_t n, hr_err_t *err) {
    LOCKED(ix, ix->ops->remove_blocks(ix->db, ids, n, err));
}

int index_claim(index_t *ix, const char *job, const char *owner, int64_t lease_ms, hr_err_t *err) {
    if (!ix->ops->claim) return unshared(err);
    LOCKED(ix, ix->ops->claim(ix->db, job, owner, lease_ms, err));
}

int index_release(index_t *ix, const char *job, const char *owner, hr_err_t *err) {
    if (!ix->ops->release) return unshared(err);
    LOCKED(ix, ix->ops->release(ix->db, job, owner, err));
}

int index_heartbeat(index_t *ix, const char *node, const char *target, const char *listen, int scrapes, hr_err_t *err) {
    if (!ix->ops->heartbeat) return unshared(err);
    LOCKED(ix, ix->ops->heartbeat(ix->db, node, target, listen, scrapes, err));
}

int index_peers(index_t *ix, const char *self, int max_age_s, char ***addrs, size_t *n, hr_err_t *err) {
    *addrs = NULL, *n = 0;
    if (!ix->ops->peers) return unshared(err);
    LOCKED(ix, ix->ops->peers(ix->db, self, max_age_s, addrs, n, err));
}

int index_scrapers(index_t *ix, int max_age_s, char ***names, size_t *n, hr_err_t *err) {
    *names = NULL, *n = 0;
    if (!ix->ops->scrapers) return unshared(err);
    LOCKED(ix, ix->ops->scrapers(ix->db, max_age_s, names, n, err));
}

int index_trash_take(index_t *ix, size_t max, char ***keys, size_t *n, hr_err_t *err) {
    *keys = NULL, *n = 0;
    if (!ix->ops->trash_take) return unshared(err);
    LOCKED(ix, ix->ops->trash_take(ix->db, max, keys, n, err));
}
