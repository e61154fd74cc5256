/* postgres.c - the cluster catalog in PostgreSQL: see backend.h and
 * storage/format/catalog.md.
 *
 * One connection, used by one call at a time (index.c's mutex). A call that finds
 * the server gone fails with HR_EIO, and the next call reconnects, so a node rides
 * out a PostgreSQL restart with 503s meanwhile. Every transaction that changes series
 * or blocks first bumps the `version` row, which also serializes them: series ids are
 * then handed out densely and committed in order, so a node that has read every id
 * up to N has missed none below it. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/vec.h"
#include "catalog/backend.h"

typedef struct {
    PGconn *c;
    char *conninfo;
    int64_t trash_delay_ms;
    int64_t txn_version; /* the version the open transaction's bump made: its change log rows' */
} pg_t;

/* The catalog schema this binary writes (hearth_meta's schema_version): 2 added the
 * change log (hearth_block_log). A catalog a newer binary upgraded is refused. */
#define PG_SCHEMA_VERSION 2

static const char *SCHEMA =
    "SELECT pg_advisory_xact_lock(7306582);"
    "CREATE TABLE IF NOT EXISTS hearth_meta(key text PRIMARY KEY, value bigint NOT NULL);"
    "INSERT INTO hearth_meta VALUES('version', 0), ('schema_version', 1) ON CONFLICT DO NOTHING;"
    "CREATE TABLE IF NOT EXISTS hearth_series(id bigint PRIMARY KEY, tenant text NOT NULL,"
    "  profile_type text NOT NULL, labels text NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS hearth_series_key ON hearth_series(tenant, profile_type, md5(labels));"
    "CREATE TABLE IF NOT EXISTS hearth_series_labels(series_id bigint NOT NULL, name text NOT NULL,"
    "  value text NOT NULL, PRIMARY KEY(series_id, name));"
    "CREATE INDEX IF NOT EXISTS hearth_series_labels_by_value ON hearth_series_labels(name, value);"
    "CREATE SEQUENCE IF NOT EXISTS hearth_block_ids;"
    "CREATE TABLE IF NOT EXISTS hearth_blocks(id bigint PRIMARY KEY, tenant text NOT NULL, key text NOT NULL,"
    "  min_time bigint NOT NULL, max_time bigint NOT NULL, profiles bigint NOT NULL, samples bigint NOT NULL,"
    "  bytes bigint NOT NULL, created timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE IF NOT EXISTS hearth_trash(key text PRIMARY KEY, delete_after timestamptz NOT NULL);"
    "CREATE TABLE IF NOT EXISTS hearth_jobs(name text PRIMARY KEY, owner text, lease_until timestamptz);"
    "CREATE TABLE IF NOT EXISTS hearth_nodes(name text PRIMARY KEY, target text NOT NULL, listen text NOT NULL,"
    "  heartbeat timestamptz NOT NULL);"
    /* Added with sharded scraping: an older catalog gains it, older nodes leave it false
     * (they scrape every target of their own config, as they always did). */
    "ALTER TABLE hearth_nodes ADD COLUMN IF NOT EXISTS scrapes boolean NOT NULL DEFAULT false;"
    /* The change log: a row per block added ('a') or removed ('r') and per series added
     * ('s'), at the version its transaction bumped to, so a node applies only what
     * changed since the version it read (block_changes). */
    "CREATE TABLE IF NOT EXISTS hearth_block_log(version bigint NOT NULL, kind char(1) NOT NULL, id bigint NOT NULL);"
    "CREATE INDEX IF NOT EXISTS hearth_block_log_by_version ON hearth_block_log(version);"
    "UPDATE hearth_meta SET value = 2 WHERE key = 'schema_version' AND value < 2;";

/* A message from libpq on one line (it spreads some over several, for terminals). */
static int pg_fail(pg_t *p, hr_err_t *err, const char *what, const PGresult *r) {
    const char *m = r ? PQresultErrorMessage(r) : "";
    if (!m || !*m) m = PQerrorMessage(p->c);
    char line[400];
    size_t k = 0;
    for (const char *c = m; *c && k + 1 < sizeof line; c++) {
        int space = *c == '\n' || *c == '\t' || *c == ' ';
        if (!space) line[k++] = *c;
        else if (k && line[k - 1] != ' ') line[k++] = ' ';
    }
    while (k && line[k - 1] == ' ') k--;
    line[k] = 0;
    return hr_fail(err, HR_EIO, "catalog (PostgreSQL) %s: %s", what, line);
}

/* PostgreSQL's notices ("relation already exists, skipping") are not Hearth's to print. */
static void quiet(void *arg, const char *message) { (void)arg, (void)message; }

/* A live connection, reconnecting once if the last one broke. 0 or -1 (HR_EIO). */
static int pg_conn(pg_t *p, hr_err_t *err) {
    if (p->c && PQstatus(p->c) == CONNECTION_OK) return 0;
    if (p->c) PQreset(p->c);
    else {
        const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
        const char *vals[] = {p->conninfo, "5", "hearth", NULL};
        p->c = PQconnectdbParams(keys, vals, 1);
    }
    if (p->c) PQsetNoticeProcessor(p->c, quiet, NULL);
    if (p->c && PQstatus(p->c) == CONNECTION_OK) return 0;
    return p->c ? pg_fail(p, err, "unreachable", NULL) : hr_fail(err, HR_ENOMEM, "out of memory");
}

/* Runs sql with n text parameters; the result when its status is want (commands:
 * PGRES_COMMAND_OK, queries: PGRES_TUPLES_OK), else NULL with err. */
static PGresult *run(pg_t *p, const char *sql, int n, const char *const *vals, hr_err_t *err) {
    if (pg_conn(p, err)) return NULL;
    PGresult *r = n ? PQexecParams(p->c, sql, n, NULL, vals, NULL, NULL, 0) : PQexec(p->c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    pg_fail(p, err, "query", r);
    PQclear(r);
    return NULL;
}

static int exec(pg_t *p, const char *sql, int n, const char *const *vals, hr_err_t *err) {
    PGresult *r = run(p, sql, n, vals, err);
    PQclear(r);
    return r ? 0 : -1;
}

static int begin(pg_t *p, hr_err_t *err) { return exec(p, "BEGIN", 0, NULL, err); }

/* Commits, or rolls back when rc says the body failed. Returns rc, or -1. */
static int finish(pg_t *p, int rc, hr_err_t *err) {
    if (rc == 0) return exec(p, "COMMIT", 0, NULL, err);
    hr_err_t ignored = {0};
    exec(p, "ROLLBACK", 0, NULL, &ignored);
    return rc;
}

/* Every change starts with this: other nodes see the new version and re-read. */
static int bump(pg_t *p, hr_err_t *err) {
    PGresult *r =
        run(p, "UPDATE hearth_meta SET value = value + 1 WHERE key = 'version' RETURNING value", 0, NULL, err);
    if (!r) return -1;
    p->txn_version = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

/* A change log row of the open transaction. */
static int log_change(pg_t *p, char kind, int64_t id, hr_err_t *err) {
    char v[24], i[24], k[2] = {kind, 0};
    snprintf(v, sizeof v, "%lld", (long long)p->txn_version);
    snprintf(i, sizeof i, "%lld", (long long)id);
    const char *vals[] = {v, k, i};
    return exec(p, "INSERT INTO hearth_block_log VALUES($1, $2, $3)", 3, vals, err);
}

static int version(void *db, int64_t *v, hr_err_t *err) {
    PGresult *r = run(db, "SELECT value FROM hearth_meta WHERE key = 'version'", 0, NULL, err);
    if (!r) return -1;
    *v = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

static int series_since(void *db, uint32_t after, index_row_fn fn, void *ctx, hr_err_t *err) {
    char a[16];
    snprintf(a, sizeof a, "%u", after);
    const char *vals[] = {a};
    PGresult *r =
        run(db, "SELECT id, tenant, profile_type, labels FROM hearth_series WHERE id > $1 ORDER BY id", 1, vals, err);
    if (!r) return -1;
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        uint32_t id = (uint32_t)strtoul(PQgetvalue(r, i, 0), NULL, 10);
        if (fn(ctx, id, PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3)))
            rc = hr_fail(err, HR_EIO, "catalog: series %u is unreadable", id);
    }
    PQclear(r);
    return rc;
}

/* The series' id if the catalog has it: 1, 0 when not, -1. */
static int find_series(pg_t *p, const char *const *vals, uint32_t *id, hr_err_t *err) {
    PGresult *r = run(p,
                      "SELECT id FROM hearth_series WHERE tenant = $1 AND profile_type = $2 AND md5(labels) = md5($3)"
                      " AND labels = $3",
                      3, vals, err);
    if (!r) return -1;
    int found = PQntuples(r) > 0;
    if (found) *id = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return found;
}

static int insert_series(pg_t *p, const char *const *vals, const labels_t *l, uint32_t *id, hr_err_t *err) {
    PGresult *r = run(p,
                      "INSERT INTO hearth_series SELECT COALESCE(MAX(id), 0) + 1, $1, $2, $3 FROM hearth_series"
                      " RETURNING id",
                      3, vals, err);
    if (!r) return -1;
    *id = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    char ids[16];
    snprintf(ids, sizeof ids, "%u", *id);
    for (size_t i = 0; i < l->n; i++) {
        const char *lv[] = {ids, l->v[i].name, l->v[i].value};
        if (exec(p, "INSERT INTO hearth_series_labels VALUES($1, $2, $3)", 3, lv, err)) return -1;
    }
    return 0;
}

static int add_series(void *db, uint32_t proposed, const char *tenant, const char *ptype, const labels_t *l,
                      const char *json, uint32_t *id, hr_err_t *err) {
    (void)proposed; /* the shared catalog decides */
    pg_t *p = db;
    const char *vals[] = {tenant, ptype, json};
    if (begin(p, err)) return -1;
    int rc = bump(p, err);
    int found = rc == 0 ? find_series(p, vals, id, err) : -1;
    if (found == 0) rc = insert_series(p, vals, l, id, err);
    else if (found < 0) rc = -1;
    if (rc == 0) rc = log_change(p, 's', found == 0 ? *id : 0, err); /* every version has its row */
    return finish(p, rc, err);
}

/* Row i of r as a block: id at column col, then tenant, key, min_time, max_time,
 * profiles, samples, bytes. */
static void block_row(const PGresult *r, int i, int col, block_meta_t *b) {
    b->id = strtoll(PQgetvalue(r, i, col), NULL, 10);
    snprintf(b->tenant, sizeof b->tenant, "%s", PQgetvalue(r, i, col + 1));
    snprintf(b->path, sizeof b->path, "%s", PQgetvalue(r, i, col + 2));
    int64_t *f[] = {&b->min_time, &b->max_time, &b->profiles, &b->samples, &b->bytes};
    for (int k = 0; k < 5; k++) *f[k] = strtoll(PQgetvalue(r, i, col + 3 + k), NULL, 10);
}

static int blocks(void *db, block_meta_t **out, size_t *n, hr_err_t *err) {
    *out = NULL, *n = 0;
    PGresult *r = run(db,
                      "SELECT id, tenant, key, min_time, max_time, profiles, samples, bytes FROM hearth_blocks"
                      " ORDER BY id",
                      0, NULL, err);
    if (!r) return -1;
    size_t rows = (size_t)PQntuples(r);
    if (!(*out = calloc(rows ? rows : 1, sizeof **out))) {
        PQclear(r);
        return hr_fail(err, HR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < rows; i++) block_row(r, (int)i, 0, &(*out)[i]);
    *n = rows;
    PQclear(r);
    return 0;
}

/* The block changes since version since, in one snapshot: blocks added that are
 * still there (their rows) and ids removed. *complete is 0 when some version of them has
 * no log row (written by a node before the change log, or pruned): the caller then reads
 * the whole list. */
static int block_changes(void *db, int64_t since, int64_t upto, block_meta_t **added, size_t *nadd, int64_t **removed,
                         size_t *nrem, int *complete, hr_err_t *err) {
    char s[24], u[24];
    snprintf(s, sizeof s, "%lld", (long long)since);
    snprintf(u, sizeof u, "%lld", (long long)upto);
    const char *vals[] = {s, u};
    *added = NULL, *removed = NULL, *nadd = *nrem = 0, *complete = 0;
    /* Versions up to upto committed before upto was read, so their rows are all there
     * for a statement of their own; the changes past upto are applied too, idempotently. */
    PGresult *c = run(db, "SELECT count(DISTINCT version) FROM hearth_block_log WHERE version > $1 AND version <= $2",
                      2, vals, err);
    if (!c) return -1;
    *complete = strtoll(PQgetvalue(c, 0, 0), NULL, 10) == upto - since;
    PQclear(c);
    if (!*complete) return 0;
    PGresult *r = run(db,
                      "SELECT l.kind, l.id, b.tenant, b.key, b.min_time, b.max_time, b.profiles, b.samples, b.bytes"
                      " FROM hearth_block_log l LEFT JOIN hearth_blocks b ON b.id = l.id AND l.kind = 'a'"
                      " WHERE l.version > $1 AND l.kind <> 's' ORDER BY l.version",
                      1, vals, err);
    if (!r) return -1;
    size_t rows = (size_t)PQntuples(r);
    *added = calloc(rows ? rows : 1, sizeof **added);
    *removed = calloc(rows ? rows : 1, sizeof **removed);
    if (!*added || !*removed) return PQclear(r), hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < rows; i++) {
        if (*PQgetvalue(r, (int)i, 0) == 'r') (*removed)[(*nrem)++] = strtoll(PQgetvalue(r, (int)i, 1), NULL, 10);
        else if (!PQgetisnull(r, (int)i, 2)) block_row(r, (int)i, 1, &(*added)[(*nadd)++]); /* added, still there */
    }
    PQclear(r);
    return 0;
}

/* Drops change log rows more than keep versions old: a node that far behind reads the
 * whole list instead. */
static int prune_log(void *db, int64_t keep, hr_err_t *err) {
    char k[24];
    snprintf(k, sizeof k, "%lld", (long long)keep);
    const char *vals[] = {k};
    return exec(db,
                "DELETE FROM hearth_block_log WHERE version < (SELECT value FROM hearth_meta WHERE key = 'version')"
                " - $1::bigint",
                1, vals, err);
}

static int next_block_id(void *db, int64_t *id, hr_err_t *err) {
    PGresult *r = run(db, "SELECT nextval('hearth_block_ids')", 0, NULL, err);
    if (!r) return -1;
    *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return 0;
}

static int insert_blocks(pg_t *p, const block_meta_t *b, size_t n, hr_err_t *err) {
    for (size_t i = 0; i < n; i++) {
        char num[6][24];
        const int64_t v[] = {b[i].id, b[i].min_time, b[i].max_time, b[i].profiles, b[i].samples, b[i].bytes};
        for (int k = 0; k < 6; k++) snprintf(num[k], sizeof num[k], "%lld", (long long)v[k]);
        const char *vals[] = {num[0], b[i].tenant, b[i].path, num[1], num[2], num[3], num[4], num[5]};
        if (exec(p, "INSERT INTO hearth_blocks VALUES($1, $2, $3, $4, $5, $6, $7, $8)", 8, vals, err) ||
            log_change(p, 'a', b[i].id, err))
            return -1;
    }
    return 0;
}

static int commit_blocks(void *db, const block_meta_t *b, size_t n, uint32_t wal_segment, hr_err_t *err) {
    (void)wal_segment; /* a cluster has no WAL: a batch is acknowledged once its block is here */
    pg_t *p = db;
    if (begin(p, err)) return -1;
    int rc = bump(p, err);
    if (rc == 0) rc = insert_blocks(p, b, n, err);
    return finish(p, rc, err);
}

/* Deletes the blocks' rows and trashes their objects; *gone receives how many rows
 * there were. */
static int drop_blocks(pg_t *p, const int64_t *ids, size_t n, size_t *gone, hr_err_t *err) {
    buf_t a;
    buf_init(&a);
    buf_putc(&a, '{');
    for (size_t i = 0; i < n; i++) buf_printf(&a, "%s%lld", i ? "," : "", (long long)ids[i]);
    buf_putc(&a, '}');
    buf_putc(&a, 0);
    if (a.oom) return buf_free(&a), hr_fail(err, HR_ENOMEM, "out of memory");
    char delay[24], ver[24];
    snprintf(delay, sizeof delay, "%lld", (long long)p->trash_delay_ms);
    snprintf(ver, sizeof ver, "%lld", (long long)p->txn_version);
    const char *vals[] = {(const char *)a.data, delay, ver};
    PGresult *r = run(p,
                      "WITH gone AS (DELETE FROM hearth_blocks WHERE id = ANY($1::bigint[]) RETURNING id, key),"
                      " trashed AS (INSERT INTO hearth_trash SELECT key, now() + $2::bigint * interval '1 millisecond'"
                      " FROM gone ON CONFLICT DO NOTHING),"
                      " logged AS (INSERT INTO hearth_block_log SELECT $3::bigint, 'r', id FROM gone)"
                      " SELECT id FROM gone",
                      3, vals, err);
    buf_free(&a);
    if (!r) return -1;
    *gone = (size_t)PQntuples(r);
    PQclear(r);
    return 0;
}

static int replace_blocks(void *db, const block_meta_t *m, size_t nm, const int64_t *ids, size_t n, hr_err_t *err) {
    pg_t *p = db;
    size_t gone = 0;
    if (begin(p, err)) return -1;
    int rc = bump(p, err);
    if (rc == 0) rc = drop_blocks(p, ids, n, &gone, err);
    if (rc == 0 && gone != n)
        rc = hr_fail(err, HR_ENOTFOUND, "%zu of the %zu blocks to replace are gone (compacted or deleted elsewhere)",
                     n - gone, n);
    if (rc == 0) rc = insert_blocks(p, m, nm, err);
    return finish(p, rc, err);
}

static int remove_blocks(void *db, const int64_t *ids, size_t n, hr_err_t *err) {
    pg_t *p = db;
    size_t gone;
    if (begin(p, err)) return -1;
    int rc = bump(p, err);
    if (rc == 0) rc = drop_blocks(p, ids, n, &gone, err); /* some may be gone already: retention elsewhere */
    return finish(p, rc, err);
}

static int claim(void *db, const char *job, const char *owner, int64_t lease_ms, hr_err_t *err) {
    pg_t *p = db;
    char ms[24];
    snprintf(ms, sizeof ms, "%lld", (long long)lease_ms);
    const char *vals[] = {job, owner, ms};
    if (exec(p, "INSERT INTO hearth_jobs(name) VALUES($1) ON CONFLICT DO NOTHING", 1, vals, err)) return -1;
    /* A job another worker is claiming this instant is locked: skipped, not waited for. */
    PGresult *r = begin(p, err) ? NULL
                                : run(p,
                                      "UPDATE hearth_jobs SET owner = $2, lease_until = now() + $3::bigint * interval"
                                      " '1 millisecond' WHERE name = (SELECT name FROM hearth_jobs WHERE name = $1 AND"
                                      " (owner IS NULL OR owner = $2 OR lease_until < now()) FOR UPDATE SKIP LOCKED)"
                                      " RETURNING name",
                                      3, vals, err);
    int taken = r ? PQntuples(r) > 0 : -1;
    PQclear(r);
    return finish(p, taken < 0 ? -1 : 0, err) ? -1 : taken;
}

static int release(void *db, const char *job, const char *owner, hr_err_t *err) {
    const char *vals[] = {job, owner};
    return exec(db, "UPDATE hearth_jobs SET owner = NULL, lease_until = NULL WHERE name = $1 AND owner = $2", 2, vals,
                err);
}

static int heartbeat(void *db, const char *node, const char *target, const char *listen, int scrapes, hr_err_t *err) {
    const char *vals[] = {node, target, listen, scrapes ? "true" : "false"};
    return exec(db,
                "INSERT INTO hearth_nodes(name, target, listen, heartbeat, scrapes) VALUES($1, $2, $3, now(), $4)"
                " ON CONFLICT(name) DO UPDATE SET target = $2, listen = $3, heartbeat = now(), scrapes = $4",
                4, vals, err);
}

/* The first column of r's rows as strings (malloc'd), and r cleared. 0 or -1. */
static int column(PGresult *r, char ***out, size_t *n, hr_err_t *err) {
    size_t rows = (size_t)PQntuples(r);
    int rc = (*out = calloc(rows ? rows : 1, sizeof **out)) ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < rows; i++)
        if (!((*out)[(*n)++] = strdup(PQgetvalue(r, (int)i, 0)))) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    PQclear(r);
    return rc;
}

static int trash_take(void *db, size_t max, char ***keys, size_t *n, hr_err_t *err) {
    char lim[24];
    snprintf(lim, sizeof lim, "%zu", max);
    const char *vals[] = {lim};
    PGresult *r = run(db,
                      "DELETE FROM hearth_trash WHERE key IN (SELECT key FROM hearth_trash WHERE delete_after < now()"
                      " LIMIT $1::bigint FOR UPDATE SKIP LOCKED) RETURNING key",
                      1, vals, err);
    return r ? column(r, keys, n, err) : -1;
}

static int peers(void *db, const char *self, int max_age_s, char ***addrs, size_t *n, hr_err_t *err) {
    char age[24];
    snprintf(age, sizeof age, "%d", max_age_s);
    const char *vals[] = {self, age};
    PGresult *r = run(db,
                      "SELECT listen FROM hearth_nodes WHERE name <> $1 AND target IN ('all', 'query')"
                      " AND heartbeat > now() - make_interval(secs => $2::int) ORDER BY name",
                      2, vals, err);
    return r ? column(r, addrs, n, err) : -1;
}

static int scrapers(void *db, int max_age_s, char ***names, size_t *n, hr_err_t *err) {
    char age[24];
    snprintf(age, sizeof age, "%d", max_age_s);
    const char *vals[] = {age};
    PGresult *r = run(db,
                      "SELECT name FROM hearth_nodes WHERE scrapes"
                      " AND heartbeat > now() - make_interval(secs => $1::int) ORDER BY name",
                      1, vals, err);
    return r ? column(r, names, n, err) : -1;
}

static void pg_close(void *db) {
    pg_t *p = db;
    if (!p) return;
    if (p->c) PQfinish(p->c);
    free(p->conninfo);
    free(p);
}

static const index_backend_t OPS = {
    .series_since = series_since,
    .add_series = add_series,
    .blocks = blocks,
    .next_block_id = next_block_id,
    .commit_blocks = commit_blocks,
    .replace_blocks = replace_blocks,
    .remove_blocks = remove_blocks,
    .version = version,
    .claim = claim,
    .release = release,
    .heartbeat = heartbeat,
    .peers = peers,
    .scrapers = scrapers,
    .block_changes = block_changes,
    .prune_log = prune_log,
    .trash_take = trash_take,
    .close = pg_close,
};

/* A catalog a newer binary upgraded is not written by this one: its nodes rely on
 * what this one would not keep. */
static int schema_check(pg_t *p, hr_err_t *err) {
    PGresult *r = run(p, "SELECT value FROM hearth_meta WHERE key = 'schema_version'", 0, NULL, err);
    if (!r) return -1;
    long long v = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (v > PG_SCHEMA_VERSION)
        return hr_fail(err, HR_EINVAL,
                       "the catalog's schema version is %lld, newer than this binary's %d: upgrade this node's "
                       "Hearth to the version the other nodes run",
                       v, PG_SCHEMA_VERSION);
    return 0;
}

void *index_pg_open(const index_pg_config_t *cfg, const index_backend_t **ops, hr_err_t *err) {
    pg_t *p = calloc(1, sizeof *p);
    if (!p || !(p->conninfo = strdup(cfg->conninfo))) {
        pg_close(p);
        return hr_fail(err, HR_ENOMEM, "out of memory"), NULL;
    }
    p->trash_delay_ms = cfg->trash_delay_ms;
    if (begin(p, err) || finish(p, exec(p, SCHEMA, 0, NULL, err), err) || schema_check(p, err)) {
        pg_close(p);
        return NULL;
    }
    *ops = &OPS;
    return p;
}
