/* index.c - see index.h. */
#include "storage/index.h"

#include <assert.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/vec.h"

struct index {
    sqlite3 *db;
    pthread_mutex_t mu;
    series_t **series; /* by id; [0] unused */
    size_t nseries, series_cap;
    idset_t set;
    int64_t next_block_id;
    int readonly;
    uint32_t wal_checkpoint;
    size_t max_per_tenant;
    struct tenant_count {
        char tenant[129];
        size_t n;
    } * counts; /* series per tenant */
    size_t ncounts, counts_cap;
};

static const char *SCHEMA = "PRAGMA journal_mode=WAL;"
                            "PRAGMA synchronous=FULL;"
                            "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                            "CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL,"
                            "  profile_type TEXT NOT NULL, labels TEXT NOT NULL);"
                            "CREATE TABLE IF NOT EXISTS series_labels(series_id INTEGER NOT NULL, name TEXT NOT NULL,"
                            "  value TEXT NOT NULL, PRIMARY KEY(series_id, name));"
                            "CREATE INDEX IF NOT EXISTS series_labels_by_value ON series_labels(name, value);"
                            "CREATE TABLE IF NOT EXISTS blocks(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL,"
                            "  path TEXT NOT NULL, min_time INTEGER NOT NULL, max_time INTEGER NOT NULL,"
                            "  profiles INTEGER NOT NULL, samples INTEGER NOT NULL, bytes INTEGER NOT NULL);";

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

static int sql_fail(index_t *ix, hr_err_t *err, const char *what) {
    if (sqlite3_errcode(ix->db) == SQLITE_FULL)
        return hr_fail(err, HR_EIO, "no space left on device for the catalog (sqlite %s)", what);
    return hr_fail(err, HR_EIO, "sqlite %s: %s", what, sqlite3_errmsg(ix->db));
}

static int load_meta(index_t *ix, hr_err_t *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ix->db, "SELECT key, value FROM meta", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(ix, err, "meta");
    int version = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        long long v = atoll((const char *)sqlite3_column_text(st, 1));
        if (strcmp(k, "schema_version") == 0) version = (int)v;
        if (strcmp(k, "wal_checkpoint") == 0) ix->wal_checkpoint = (uint32_t)v;
    }
    sqlite3_finalize(st);
    if (version > INDEX_SCHEMA_VERSION)
        return hr_fail(err, HR_EIO, "index: schema version %d is newer than this binary (%d)", version,
                       INDEX_SCHEMA_VERSION);
    /* Written only when it changes: a start must not need to write (a full disk). */
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta VALUES('schema_version','%d')", INDEX_SCHEMA_VERSION);
    if (version != INDEX_SCHEMA_VERSION && !ix->readonly && sqlite3_exec(ix->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return sql_fail(ix, err, "meta");
    if (sqlite3_prepare_v2(ix->db, "SELECT COALESCE(MAX(id),0)+1 FROM blocks", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(ix, err, "blocks");
    if (sqlite3_step(st) == SQLITE_ROW) ix->next_block_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
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

static int load_series(index_t *ix, hr_err_t *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ix->db, "SELECT id, tenant, profile_type, labels FROM series ORDER BY id", -1, &st, NULL) !=
        SQLITE_OK)
        return sql_fail(ix, err, "series");
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        labels_t l;
        labels_init(&l);
        uint32_t id = (uint32_t)sqlite3_column_int64(st, 0);
        if (labels_from_json((const char *)sqlite3_column_text(st, 3), &l) ||
            mirror_add(ix, id, (const char *)sqlite3_column_text(st, 1), (const char *)sqlite3_column_text(st, 2), &l))
            rc = hr_fail(err, HR_EIO, "index: series %u is unreadable", id);
        labels_destroy(&l);
    }
    sqlite3_finalize(st);
    return rc;
}

static index_t *open_mode(const char *path, int readonly, hr_err_t *err) {
    index_t *ix = calloc(1, sizeof *ix);
    if (!ix) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&ix->mu, NULL);
    idset_init(&ix->set);
    ix->nseries = 1; /* id 0 is never a series */
    if (VEC_RESERVE(ix->series, ix->series_cap, 1)) goto fail;
    ix->series[0] = NULL;
    ix->readonly = readonly;
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &ix->db, flags, NULL) != SQLITE_OK) {
        hr_fail(err, HR_EIO, "sqlite open %s: %s", path, sqlite3_errmsg(ix->db));
        goto fail;
    }
    sqlite3_busy_timeout(ix->db, 5000);
    char *msg = NULL;
    if (!readonly && sqlite3_exec(ix->db, SCHEMA, NULL, NULL, &msg) != SQLITE_OK) {
        hr_fail(err, HR_EIO, "sqlite schema: %s", msg ? msg : "?");
        sqlite3_free(msg);
        goto fail;
    }
    if (load_meta(ix, err) || load_series(ix, err)) goto fail;
    return ix;
fail:
    index_close(ix);
    return NULL;
}

index_t *index_open(const char *path, hr_err_t *err) { return open_mode(path, 0, err); }
index_t *index_open_readonly(const char *path, hr_err_t *err) { return open_mode(path, 1, err); }

void index_close(index_t *ix) {
    if (!ix) return;
    for (size_t i = 0; i < ix->nseries; i++) series_free(ix->series[i]);
    free(ix->series);
    free(ix->counts);
    idset_free(&ix->set);
    sqlite3_close(ix->db);
    pthread_mutex_destroy(&ix->mu);
    free(ix);
}

/* Runs body inside one IMMEDIATE transaction, rolling back if it or the commit fails.
 * body returns 0, or -1 after a failed SQLite call (finalizing its own statements). */
typedef int (*txn_body_fn)(sqlite3 *db, const void *ctx);

static int in_txn(index_t *ix, const char *what, txn_body_fn body, const void *ctx, hr_err_t *err) {
    if (sqlite3_exec(ix->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return sql_fail(ix, err, what);
    if (body(ix->db, ctx) == 0 && sqlite3_exec(ix->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return 0;
    sql_fail(ix, err, what); /* read the message before ROLLBACK replaces it */
    sqlite3_exec(ix->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Prepares sql, runs bind(stmt, i) + step for i in [0, n), finalizes. */
static int each_row(sqlite3 *db, const char *sql, size_t n, void (*bind)(sqlite3_stmt *, const void *, size_t),
                    const void *ctx) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        sqlite3_reset(st);
        bind(st, ctx, i);
        if (sqlite3_step(st) != SQLITE_DONE) rc = -1;
    }
    sqlite3_finalize(st);
    return rc;
}

typedef struct {
    uint32_t id;
    const char *tenant, *ptype, *json;
    const labels_t *l;
} series_row_t;

static void bind_series(sqlite3_stmt *st, const void *ctx, size_t i) {
    (void)i;
    const series_row_t *r = ctx;
    sqlite3_bind_int64(st, 1, r->id);
    sqlite3_bind_text(st, 2, r->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->ptype, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->json, -1, SQLITE_STATIC);
}

static void bind_label(sqlite3_stmt *st, const void *ctx, size_t i) {
    const series_row_t *r = ctx;
    sqlite3_bind_int64(st, 1, r->id);
    sqlite3_bind_text(st, 2, r->l->v[i].name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->l->v[i].value, -1, SQLITE_STATIC);
}

static int insert_series(sqlite3 *db, const void *ctx) {
    const series_row_t *r = ctx;
    if (each_row(db, "INSERT INTO series VALUES(?,?,?,?)", 1, bind_series, r)) return -1;
    return each_row(db, "INSERT INTO series_labels VALUES(?,?,?)", r->l->n, bind_label, r);
}

static int persist_series(index_t *ix, uint32_t id, const char *tenant, const char *ptype, const labels_t *l,
                          hr_err_t *err) {
    json_t *o = json_object();
    for (size_t i = 0; i < l->n; i++) json_object_set_new(o, l->v[i].name, json_string(l->v[i].value));
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (!text) return hr_fail(err, HR_ENOMEM, "out of memory");
    series_row_t row = {id, tenant, ptype, text, l};
    int rc = in_txn(ix, "insert series", insert_series, &row, err);
    free(text);
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
        found = (uint32_t)ix->nseries;
        series_t *s = mirror_prepare(ix, found, tenant, ptype, labels);
        if (!s) rc = hr_fail(err, HR_ENOMEM, "out of memory");
        else if (persist_series(ix, found, tenant, ptype, labels, err)) rc = -1, series_free(s);
        else mirror_publish(ix, s);
    }
    pthread_mutex_unlock(&ix->mu);
    *id = found;
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

int index_blocks(index_t *ix, block_meta_t **out, size_t *n, hr_err_t *err) {
    pthread_mutex_lock(&ix->mu);
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    int rc = 0;
    if (sqlite3_prepare_v2(ix->db,
                           "SELECT id, tenant, path, min_time, max_time, profiles, samples,"
                           " bytes FROM blocks ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = sql_fail(ix, err, "blocks");
        goto out;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (VEC_RESERVE(*out, cap, *n + 1)) {
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        block_meta_t *b = &(*out)[(*n)++];
        memset(b, 0, sizeof *b);
        b->id = sqlite3_column_int64(st, 0);
        snprintf(b->tenant, sizeof b->tenant, "%s", (const char *)sqlite3_column_text(st, 1));
        snprintf(b->path, sizeof b->path, "%s", (const char *)sqlite3_column_text(st, 2));
        b->min_time = sqlite3_column_int64(st, 3);
        b->max_time = sqlite3_column_int64(st, 4);
        b->profiles = sqlite3_column_int64(st, 5);
        b->samples = sqlite3_column_int64(st, 6);
        b->bytes = sqlite3_column_int64(st, 7);
    }
    sqlite3_finalize(st);
out:
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

int64_t index_next_block_id(index_t *ix) {
    pthread_mutex_lock(&ix->mu);
    int64_t id = ix->next_block_id++;
    pthread_mutex_unlock(&ix->mu);
    return id;
}

uint32_t index_wal_checkpoint(index_t *ix) {
    pthread_mutex_lock(&ix->mu);
    uint32_t c = ix->wal_checkpoint;
    pthread_mutex_unlock(&ix->mu);
    return c;
}

typedef struct {
    const block_meta_t *b;
    const int64_t *ids;
    size_t n; /* of b, or of ids (removing); replacing: of ids, with nb of b */
    uint32_t wal_segment;
    size_t nb;
} blocks_txn_t;

static void bind_block(sqlite3_stmt *st, const void *ctx, size_t i) {
    const block_meta_t *b = &((const blocks_txn_t *)ctx)->b[i];
    sqlite3_bind_int64(st, 1, b->id);
    sqlite3_bind_text(st, 2, b->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, b->path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, b->min_time);
    sqlite3_bind_int64(st, 5, b->max_time);
    sqlite3_bind_int64(st, 6, b->profiles);
    sqlite3_bind_int64(st, 7, b->samples);
    sqlite3_bind_int64(st, 8, b->bytes);
}

static void bind_checkpoint(sqlite3_stmt *st, const void *ctx, size_t i) {
    (void)i;
    sqlite3_bind_int64(st, 1, ((const blocks_txn_t *)ctx)->wal_segment);
}

static void bind_block_id(sqlite3_stmt *st, const void *ctx, size_t i) {
    sqlite3_bind_int64(st, 1, ((const blocks_txn_t *)ctx)->ids[i]);
}

static int insert_blocks(sqlite3 *db, const void *ctx) {
    const blocks_txn_t *t = ctx;
    if (each_row(db, "INSERT INTO blocks VALUES(?,?,?,?,?,?,?,?)", t->n, bind_block, t)) return -1;
    return each_row(db, "INSERT OR REPLACE INTO meta VALUES('wal_checkpoint', ?)", 1, bind_checkpoint, t);
}

static int delete_blocks(sqlite3 *db, const void *ctx) {
    const blocks_txn_t *t = ctx;
    return each_row(db, "DELETE FROM blocks WHERE id = ?", t->n, bind_block_id, t);
}

static int replace_blocks(sqlite3 *db, const void *ctx) {
    const blocks_txn_t *t = ctx;
    if (each_row(db, "INSERT INTO blocks VALUES(?,?,?,?,?,?,?,?)", t->nb, bind_block, t)) return -1;
    return each_row(db, "DELETE FROM blocks WHERE id = ?", t->n, bind_block_id, t);
}

int index_replace_blocks(index_t *ix, const block_meta_t *merged, size_t nmerged, const int64_t *ids, size_t n,
                         hr_err_t *err) {
    blocks_txn_t t = {merged, ids, n, 0, nmerged};
    pthread_mutex_lock(&ix->mu);
    int rc = in_txn(ix, "replace blocks", replace_blocks, &t, err);
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

int index_commit_blocks(index_t *ix, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err) {
    blocks_txn_t t = {b, NULL, n, wal_segment, 0};
    pthread_mutex_lock(&ix->mu);
    int rc = in_txn(ix, "commit blocks", insert_blocks, &t, err);
    if (rc == 0) ix->wal_checkpoint = wal_segment;
    pthread_mutex_unlock(&ix->mu);
    return rc;
}

int index_remove_blocks(index_t *ix, const int64_t *ids, size_t n, hr_err_t *err) {
    blocks_txn_t t = {NULL, ids, n, 0, 0};
    pthread_mutex_lock(&ix->mu);
    int rc = in_txn(ix, "delete blocks", delete_blocks, &t, err);
    pthread_mutex_unlock(&ix->mu);
    return rc;
}
