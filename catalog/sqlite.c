/* sqlite.c - the single-node catalog in SQLite: see backend.h. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/vec.h"
#include "catalog/backend.h"

typedef struct {
    sqlite3 *db;
    int readonly;
    int64_t next_block_id;
    uint32_t wal_checkpoint;
} lite_t;

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

static int sql_fail(lite_t *l, hr_err_t *err, const char *what) {
    if (sqlite3_errcode(l->db) == SQLITE_FULL)
        return hr_fail(err, HR_EIO, "no space left on device for the catalog (sqlite %s)", what);
    return hr_fail(err, HR_EIO, "sqlite %s: %s", what, sqlite3_errmsg(l->db));
}

static int load_meta(lite_t *l, hr_err_t *err) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(l->db, "SELECT key, value FROM meta", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(l, err, "meta");
    int version = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        long long v = atoll((const char *)sqlite3_column_text(st, 1));
        if (strcmp(k, "schema_version") == 0) version = (int)v;
        if (strcmp(k, "wal_checkpoint") == 0) l->wal_checkpoint = (uint32_t)v;
    }
    sqlite3_finalize(st);
    if (version > INDEX_SCHEMA_VERSION)
        return hr_fail(err, HR_EIO, "index: schema version %d is newer than this binary (%d)", version,
                       INDEX_SCHEMA_VERSION);
    /* Written only when it changes: a start must not need to write (a full disk). */
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta VALUES('schema_version','%d')", INDEX_SCHEMA_VERSION);
    if (version != INDEX_SCHEMA_VERSION && !l->readonly && sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return sql_fail(l, err, "meta");
    if (sqlite3_prepare_v2(l->db, "SELECT COALESCE(MAX(id),0)+1 FROM blocks", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(l, err, "blocks");
    if (sqlite3_step(st) == SQLITE_ROW) l->next_block_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int series_since(void *db, uint32_t after, index_row_fn fn, void *ctx, hr_err_t *err) {
    lite_t *l = db;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(l->db, "SELECT id, tenant, profile_type, labels FROM series WHERE id > ? ORDER BY id", -1,
                           &st, NULL) != SQLITE_OK)
        return sql_fail(l, err, "series");
    sqlite3_bind_int64(st, 1, after);
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        uint32_t id = (uint32_t)sqlite3_column_int64(st, 0);
        if (fn(ctx, id, (const char *)sqlite3_column_text(st, 1), (const char *)sqlite3_column_text(st, 2),
               (const char *)sqlite3_column_text(st, 3)))
            rc = hr_fail(err, HR_EIO, "index: series %u is unreadable", id);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Runs body inside one IMMEDIATE transaction, rolling back if it or the commit fails.
 * body returns 0, or -1 after a failed SQLite call (finalizing its own statements). */
typedef int (*txn_body_fn)(sqlite3 *db, const void *ctx);

static int in_txn(lite_t *l, const char *what, txn_body_fn body, const void *ctx, hr_err_t *err) {
    if (sqlite3_exec(l->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return sql_fail(l, err, what);
    if (body(l->db, ctx) == 0 && sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return 0;
    sql_fail(l, err, what); /* read the message before ROLLBACK replaces it */
    sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
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

static int add_series(void *db, uint32_t proposed, const char *tenant, const char *ptype, const labels_t *l,
                      const char *json, uint32_t *id, hr_err_t *err) {
    series_row_t row = {proposed, tenant, ptype, json, l};
    *id = proposed;
    return in_txn(db, "insert series", insert_series, &row, err);
}

static int blocks(void *db, block_meta_t **out, size_t *n, hr_err_t *err) {
    lite_t *l = db;
    sqlite3_stmt *st;
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    if (sqlite3_prepare_v2(l->db,
                           "SELECT id, tenant, path, min_time, max_time, profiles, samples,"
                           " bytes FROM blocks ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return sql_fail(l, err, "blocks");
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
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
    return rc;
}

static int next_block_id(void *db, int64_t *id, hr_err_t *err) {
    (void)err;
    *id = ((lite_t *)db)->next_block_id++;
    return 0;
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

static int replace_blocks_txn(sqlite3 *db, const void *ctx) {
    const blocks_txn_t *t = ctx;
    if (each_row(db, "INSERT INTO blocks VALUES(?,?,?,?,?,?,?,?)", t->nb, bind_block, t)) return -1;
    return each_row(db, "DELETE FROM blocks WHERE id = ?", t->n, bind_block_id, t);
}

/* One node: only this process changes the catalog, so the inputs are all there. */
static int replace_blocks(void *db, const block_meta_t *m, size_t nm, const int64_t *ids, size_t n, hr_err_t *err) {
    blocks_txn_t t = {m, ids, n, 0, nm};
    return in_txn(db, "replace blocks", replace_blocks_txn, &t, err);
}

static int commit_blocks(void *db, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err) {
    lite_t *l = db;
    blocks_txn_t t = {b, NULL, n, wal_segment, 0};
    int rc = in_txn(l, "commit blocks", insert_blocks, &t, err);
    if (rc == 0) l->wal_checkpoint = wal_segment;
    return rc;
}

static int remove_blocks(void *db, const int64_t *ids, size_t n, hr_err_t *err) {
    blocks_txn_t t = {NULL, ids, n, 0, 0};
    return in_txn(db, "delete blocks", delete_blocks, &t, err);
}

static uint32_t wal_checkpoint(void *db) { return ((lite_t *)db)->wal_checkpoint; }

static void lite_close(void *db) {
    lite_t *l = db;
    if (!l) return;
    sqlite3_close(l->db);
    free(l);
}

static const index_backend_t OPS = {
    .series_since = series_since,
    .add_series = add_series,
    .blocks = blocks,
    .next_block_id = next_block_id,
    .commit_blocks = commit_blocks,
    .replace_blocks = replace_blocks,
    .remove_blocks = remove_blocks,
    .wal_checkpoint = wal_checkpoint,
    .close = lite_close,
};

void *index_sqlite_open(const char *path, int readonly, const index_backend_t **ops, hr_err_t *err) {
    lite_t *l = calloc(1, sizeof *l);
    if (!l) return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    l->readonly = readonly;
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &l->db, flags, NULL) != SQLITE_OK) {
        hr_fail(err, HR_EIO, "sqlite open %s: %s", path, sqlite3_errmsg(l->db));
        goto fail;
    }
    sqlite3_busy_timeout(l->db, 5000);
    char *msg = NULL;
    if (!readonly && sqlite3_exec(l->db, SCHEMA, NULL, NULL, &msg) != SQLITE_OK) {
        hr_fail(err, HR_EIO, "sqlite schema: %s", msg ? msg : "?");
        sqlite3_free(msg);
        goto fail;
    }
    if (load_meta(l, err)) goto fail;
    *ops = &OPS;
    return l;
fail:
    lite_close(l);
    return NULL;
}
