/* check.c - `hearth check DATA_DIR`: verify a data directory offline.
 *
 * Reads every block in the catalog (checksums and every id, via block_read),
 * compares its counts with the catalog, looks for block files the catalog does not
 * know and catalog rows whose file is gone, and reads the WAL without changing it.
 * It only reads (the catalog opened read-only, no lock), so it runs beside a live
 * server and on a full disk. With --quarantine, unreadable blocks move to
 * DATA_DIR/quarantine/ and leave the catalog, so the server starts clean; that takes
 * the data directory's lock, so it refuses while a server runs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "storage/block.h"
#include "common/fsutil.h"
#include "catalog/index.h"
#include "remote/objstore.h"
#include "storage/wal.h"

static const char USAGE[] = "Usage: hearth check DATA_DIR [--quarantine]\n"
                            "       hearth check --catalog POSTGRES_URL --object-store S3_URL\n\n"
                            "Verifies block checksums, the block catalog and the WAL of a data directory; or, for a\n"
                            "cluster, every block the shared catalog names, read back from the object store.\n"
                            "Exits 0 when everything is sound, 1 when problems remain.\n\n"
                            "Flags:\n"
                            "  --quarantine     move unreadable blocks to DATA_DIR/quarantine/ and drop them from the\n"
                            "                   catalog (stop the server first)\n"
                            "  --catalog        a cluster's PostgreSQL catalog (as hearth serve --catalog)\n"
                            "  --object-store   its object store (as hearth serve --object-store; keys from\n"
                            "                   AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)\n\n"
                            "Example:\n"
                            "  hearth check /var/lib/hearth --quarantine\n";

static int quarantine(const char *dir, index_t *ix, const block_meta_t *b) {
    char qdir[4096], from[4096], to[4200];
    snprintf(qdir, sizeof qdir, "%s/quarantine", dir);
    hr_err_t err = {0};
    if (fs_mkdirs(qdir, &err)) return fprintf(stderr, "  cannot create %s: %s\n", qdir, err.msg), -1;
    snprintf(from, sizeof from, "%s/%s", dir, b->path);
    snprintf(to, sizeof to, "%s/%s-%08lld.blk", qdir, b->tenant, (long long)b->id);
    if (rename(from, to) != 0 && errno != ENOENT)
        return fprintf(stderr, "  cannot move %s: %s\n", from, strerror(errno)), -1;
    if (index_remove_blocks(ix, &b->id, 1, &err)) return fprintf(stderr, "  %s\n", err.msg), -1;
    printf("  quarantined to %s\n", to);
    return 0;
}

/* Checks the catalog's blocks; returns the number of problems left. */
static int check_blocks(const char *dir, index_t *ix, const block_meta_t *b, size_t n, int fix) {
    int problems = 0, tty = isatty(1);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, b[i].path);
        hr_err_t err = {0};
        segment_t *s = block_read(path, &err);
        const char *why = s ? NULL : err.msg;
        if (s && ((int64_t)s->nprofiles != b[i].profiles || (int64_t)s->nsamples != b[i].samples))
            why = "counts differ from the catalog";
        segment_free(s);
        if (!why) {
            if (tty) printf("\r[%zu/%zu] blocks ok", i + 1, n);
            continue;
        }
        printf("%sBAD block %lld (%s): %s\n", tty ? "\n" : "", (long long)b[i].id, b[i].path, why);
        if (!fix || quarantine(dir, ix, &b[i])) problems++;
    }
    if (tty && n) printf("\n");
    return problems;
}

/* Block files on disk that the catalog does not list. */
static int check_orphans(const char *dir, const block_meta_t *b, size_t n) {
    char bdir[4096];
    snprintf(bdir, sizeof bdir, "%s/blocks", dir);
    DIR *d = opendir(bdir);
    if (!d) return 0;
    int orphans = 0;
    struct dirent *t;
    while ((t = readdir(d))) {
        if (t->d_name[0] == '.') continue;
        char tdir[4400];
        snprintf(tdir, sizeof tdir, "%s/%s", bdir, t->d_name);
        DIR *td = opendir(tdir);
        struct dirent *e;
        while (td && (e = readdir(td))) {
            if (e->d_name[0] == '.') continue;
            char rel[1024];
            snprintf(rel, sizeof rel, "blocks/%s/%s", t->d_name, e->d_name);
            int known = 0;
            for (size_t i = 0; i < n && !known; i++) known = !strcmp(b[i].path, rel);
            if (!known) {
                printf("note: %s is not in the catalog (left by an interrupted cut; the server deletes it at start)\n",
                       rel);
                orphans++;
            }
        }
        if (td) closedir(td);
    }
    closedir(d);
    return orphans;
}

/* Reads every block the cluster catalog names back from the object store: the whole
 * object, every checksum and id, counts against the catalog. Returns the problems. */
static int check_cluster_blocks(objstore_t *os, const block_meta_t *b, size_t n) {
    int problems = 0, tty = isatty(1);
    for (size_t i = 0; i < n; i++) {
        buf_t img;
        buf_init(&img);
        hr_err_t err = {0};
        segment_t *s = objstore_get(os, b[i].path, (size_t)b[i].bytes + 1, &img, &err) == 0
                           ? block_decode(img.data, img.len, &err)
                           : NULL;
        const char *why = s ? NULL : err.msg;
        if (s && ((int64_t)s->nprofiles != b[i].profiles || (int64_t)s->nsamples != b[i].samples ||
                  (int64_t)img.len != b[i].bytes))
            why = "size or counts differ from the catalog";
        segment_free(s);
        buf_free(&img);
        if (!why) {
            if (tty) printf("\r[%zu/%zu] blocks ok", i + 1, n);
            continue;
        }
        printf("%sBAD block %lld (%s): %s\n", tty ? "\n" : "", (long long)b[i].id, b[i].path, why);
        problems++;
    }
    if (tty && n) printf("\n");
    return problems;
}

static int check_cluster(const char *catalog, const char *objects) {
    hr_err_t err = {0};
    objstore_config_t oc = {.url = objects};
    objstore_t *os = objstore_open(&oc, &err);
    index_pg_config_t pc = {catalog, 0};
    index_t *ix = os ? index_open_pg(&pc, &err) : NULL;
    block_meta_t *blocks = NULL;
    size_t n = 0;
    if (!ix || index_blocks(ix, &blocks, &n, &err)) {
        fprintf(stderr, "hearth check: %s\n", err.msg);
        index_close(ix);
        objstore_free(os);
        return 1;
    }
    printf("catalog: %zu series, %zu blocks\n", index_series_total(ix), n);
    int problems = check_cluster_blocks(os, blocks, n);
    free(blocks);
    index_close(ix);
    objstore_free(os);
    printf("%s\n", problems ? "problems found" : "ok");
    return problems ? 1 : 0;
}

int cli_check(int argc, char **argv) {
    const char *fix = NULL, *catalog = NULL, *objects = NULL, *pos[1];
    size_t npos;
    cli_opt_t opts[] = {{"quarantine", &fix, 1}, {"catalog", &catalog, 0}, {"object-store", &objects, 0}};
    int rc = cli_parse(argc, argv, opts, 3, pos, 1, &npos, USAGE);
    if (rc) return rc == 1 ? 0 : rc;
    if (!catalog != !objects)
        return fprintf(stderr, "hearth check: a cluster needs both --catalog and --object-store\n"), 2;
    if (catalog) return check_cluster(catalog, objects);
    if (!npos) return fprintf(stderr, "hearth check: need DATA_DIR (see hearth check --help)\n"), 2;
    const char *dir = pos[0];
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/index.db", dir);
    if (stat(path, &st) != 0) {
        fprintf(stderr, "hearth check: %s is not a Hearth data directory (no index.db)\n", dir);
        return 1;
    }
    hr_err_t err = {0};
    /* Checking only reads, so it needs no lock and works beside a running server and
     * on a full disk; quarantining writes, so it takes the server's lock first. */
    int lock = -1;
    if (fix && (lock = fs_lock_dir(dir, &err)) < 0) {
        fprintf(stderr, "hearth check --quarantine: %s\n", err.msg);
        return 1;
    }
    index_t *ix = fix ? index_open(path, &err) : index_open_readonly(path, &err);
    block_meta_t *blocks = NULL;
    size_t n = 0;
    if (!ix || index_blocks(ix, &blocks, &n, &err)) {
        fprintf(stderr, "hearth check: index: %s\n", err.msg);
        index_close(ix);
        if (lock >= 0) close(lock);
        return 1;
    }
    printf("index: %zu series, %zu blocks, WAL checkpoint %u\n", index_series_total(ix), n, index_wal_checkpoint(ix));
    int problems = check_blocks(dir, ix, blocks, n, fix != NULL);
    check_orphans(dir, blocks, n);
    wal_scan_t ws;
    snprintf(path, sizeof path, "%s/wal", dir);
    if (wal_verify(path, &ws, &err) == 0) {
        printf("wal: %zu segments, %zu intact records%s\n", ws.segments, ws.records,
               ws.torn_bytes ? " and a torn tail (a crash mid-write; replay drops it, nothing acknowledged is lost)"
                             : "");
        if (ws.corrupt) {
            printf("BAD wal: %zu damaged regions (%llu bytes) between intact records; replay skips them and "
                   "keeps every intact record, but what they held is lost\n",
                   ws.corrupt, (unsigned long long)ws.corrupt_bytes);
            problems++;
        }
    } else {
        printf("wal: %s\n", err.msg);
        problems++;
    }
    free(blocks);
    index_close(ix);
    if (lock >= 0) close(lock);
    printf("%s\n", problems ? "problems found: run with --quarantine (server stopped) to set bad blocks aside" : "ok");
    return problems ? 1 : 0;
}
