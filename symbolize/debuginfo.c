/* debuginfo.c - see debuginfo.h. */
#include "symbolize/debuginfo.h"

#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeparse.h"
#include "common/vec.h"
#include "common/fsutil.h"
#include "symbolize/buildid.h"
#include "symbolize/elf.h"
#include "symbolize/source_archive.h"

/* A path under one of the folders: the folder (4096) and a file name (upload_name). */
#define PATH_CAP 4500
#define NO_DEADLINE_WAIT_NS (30 * 1000000000LL) /* a download without a query deadline */

/* A download that ran past its query's deadline is remembered this long (or the
 * negative TTL, if shorter): the next queries answer with addresses at once instead of
 * each waiting out its own deadline on the same silent server. */
#define LATE_TTL_NS (30 * 1000000000LL)

typedef struct {
    char id[257];
    int64_t until_ns;
    uint64_t generation;
    int late; /* the download timed out (not: no server has it) */
} missing_t;

struct debuginfo {
    char uploads[4096], downloads[4096], local[4096];
    int debuginfod;
    atomic_ullong generation;
    int64_t negative_ttl_ns;
    size_t max_bytes;
    uint64_t quota, keep_free;
    pthread_mutex_t mu; /* missing, and an upload's owner check with its rename */
    missing_t *missing;
    size_t nmissing, missing_cap;
    objstore_t *objects; /* cluster mode: shared uploads; NULL on one node */
};

#define OBJECT_CHUNK (8u << 20) /* a shared file is downloaded this many bytes per request */

int build_id_valid(const char *id) {
    size_t n = strlen(id);
    if (n < 2 || n > 256 || n % 2) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f') || (id[i] >= 'A' && id[i] <= 'F')))
            return 0;
    return 1;
}

/* Uploads a crash interrupted (http.h's spool files, ".upload-*") are removed. */
static void remove_spooled(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    for (struct dirent *e; (e = readdir(dp));) {
        if (strncmp(e->d_name, ".upload-", 8)) continue;
        char path[PATH_CAP];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dp);
}

debuginfo_t *debuginfo_new(const debuginfo_config_t *cfg, hr_err_t *err) {
    debuginfo_t *d = calloc(1, sizeof *d);
    if (!d) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(d->uploads, sizeof d->uploads, "%s/debuginfo", cfg->data_dir);
    snprintf(d->downloads, sizeof d->downloads, "%s/debuginfod", cfg->data_dir);
    snprintf(d->local, sizeof d->local, "%s", cfg->local_dir ? cfg->local_dir : "");
    d->negative_ttl_ns = cfg->negative_ttl_ns;
    d->max_bytes = cfg->max_bytes;
    d->quota = cfg->quota;
    d->keep_free = cfg->keep_free;
    d->objects = cfg->objects;
    pthread_mutex_init(&d->mu, NULL);
    if ((mkdir(d->uploads, 0755) && errno != EEXIST) || (mkdir(d->downloads, 0755) && errno != EEXIST)) {
        hr_fail(err, HR_EIO, "cannot create %s: %s", d->uploads, strerror(errno));
        debuginfo_free(d);
        return NULL;
    }
    remove_spooled(d->uploads);
    if (cfg->debuginfod_urls && *cfg->debuginfod_urls) {
        setenv("DEBUGINFOD_URLS", cfg->debuginfod_urls, 1);
        setenv("DEBUGINFOD_CACHE_PATH", d->downloads, 1);
        d->debuginfod = 1;
    }
    return d;
}

void debuginfo_free(debuginfo_t *d) {
    if (!d) return;
    pthread_mutex_destroy(&d->mu);
    free(d->missing);
    free(d);
}

uint64_t debuginfo_generation(debuginfo_t *d) { return atomic_load(&d->generation); }

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The local folder's layouts, first match wins. */
static int find_local(const debuginfo_t *d, const char *id, char *path, size_t cap) {
    static const char *const LAYOUTS[] = {"%s/%s", "%s/%s.debuginfo", "%s/%s/debuginfo"};
    if (!d->local[0]) return 0;
    for (size_t i = 0; i < sizeof LAYOUTS / sizeof *LAYOUTS; i++) {
        snprintf(path, cap, LAYOUTS[i], d->local, id);
        if (is_file(path)) return 1;
    }
    return 0;
}

/* What a download's progress is checked against. */
typedef struct {
    int64_t deadline_ns;
    size_t max_bytes; /* 0 = no limit */
    int too_big;      /* set when the download passed max_bytes */
} transfer_t;

/* libdebuginfod calls this while it downloads, with the bytes received so far; non-zero
 * aborts the transfer. A server that streams without end is cut off here, whatever
 * Content-Length it sent (or none): nothing else bounds what it writes to the disk.
 * (libdebuginfod's own DEBUGINFOD_MAXSIZE is not used: elfutils 0.188 leaks a stdio
 * buffer on every lookup with it set, which LeakSanitizer reports.) */
static int on_progress(debuginfod_client *c, long got, long total) {
    (void)total;
    transfer_t *t = debuginfod_get_user_data(c);
    if (t->max_bytes && got > 0 && (size_t)got > t->max_bytes) return t->too_big = 1;
    return time_now_ns() > t->deadline_ns;
}

/* libdebuginfod records any failed download, an aborted one too, as an empty file it
 * answers "missing" from for cache_miss_s (10 minutes); a partial file must not stay. */
static void drop_download(const char *downloads, const char *id) {
    char miss[PATH_CAP];
    struct stat st;
    snprintf(miss, sizeof miss, "%s/%s/debuginfo", downloads, id);
    if (stat(miss, &st) == 0 && st.st_size == 0) unlink(miss);
}

/* The bytes of the regular files under dir, depth levels of folders down. */
static uint64_t dir_bytes(const char *dir, int depth) {
    DIR *dp = opendir(dir);
    uint64_t n = 0;
    for (struct dirent *e; dp && (e = readdir(dp));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[PATH_CAP];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &st)) continue;
        if (S_ISREG(st.st_mode) && strncmp(e->d_name, ".upload-", 8)) n += (uint64_t)st.st_size;
        else if (S_ISDIR(st.st_mode) && depth > 0) n += dir_bytes(path, depth - 1);
    }
    if (dp) closedir(dp);
    return n;
}

int debuginfo_room(const debuginfo_t *d, uint64_t incoming, int spooled, hr_err_t *err) {
    uint64_t free_bytes = fs_free_bytes(d->uploads), need = spooled ? 0 : incoming;
    if (free_bytes != UINT64_MAX && (free_bytes < d->keep_free || free_bytes - d->keep_free < need))
        return hr_fail(err, HR_ELIMIT,
                       "the data disk has %llu bytes free, and debug files leave %llu of them to profile uploads "
                       "(--debuginfo-keep-free): no room for %llu more",
                       (unsigned long long)free_bytes, (unsigned long long)d->keep_free, (unsigned long long)incoming);
    if (!d->quota) return 0;
    uint64_t used = dir_bytes(d->uploads, 0) + dir_bytes(d->downloads, 1);
    if (used > d->quota || d->quota - used < incoming)
        return hr_fail(err, HR_ELIMIT, "debug files take %llu bytes of --debuginfo-quota %llu: no room for %llu more",
                       (unsigned long long)used, (unsigned long long)d->quota, (unsigned long long)incoming);
    return 0;
}

static debuginfo_found_t fetch(const debuginfo_t *d, const char *id, int64_t deadline_ns, char *path, size_t cap) {
    hr_err_t room = {0};
    if (debuginfo_room(d, d->max_bytes, 0, &room)) { /* the whole file may come */
        log_event(LOG_WARN, "symbolize.debuginfod_no_room", "build_id=%s err=\"%s\"", id, room.msg);
        return DEBUGINFO_MISSING;
    }
    debuginfod_client *c = debuginfod_begin();
    if (!c) return DEBUGINFO_MISSING;
    transfer_t t = {deadline_ns ? deadline_ns : time_now_ns() + NO_DEADLINE_WAIT_NS, d->max_bytes, 0};
    debuginfod_set_user_data(c, &t);
    debuginfod_set_progressfn(c, on_progress);
    char *got = NULL;
    int fd = debuginfod_find_debuginfo(c, (const unsigned char *)id, 0, &got);
    debuginfod_end(c);
    if (fd >= 0) {
        struct stat st;
        int big = d->max_bytes && fstat(fd, &st) == 0 && (size_t)st.st_size > d->max_bytes;
        close(fd);
        if (big) { /* it came in one piece before a progress call could stop it */
            unlink(got);
            free(got);
            log_event(LOG_WARN, "symbolize.debuginfod_too_big", "build_id=%s max_bytes=%zu", id, d->max_bytes);
            return DEBUGINFO_MISSING;
        }
        snprintf(path, cap, "%s", got);
        free(got);
        log_event(LOG_INFO, "symbolize.debuginfod_fetched", "build_id=%s path=%s", id, path);
        return DEBUGINFO_FOUND;
    }
    free(got);
    if (t.too_big) {
        drop_download(d->downloads, id);
        log_event(LOG_WARN, "symbolize.debuginfod_too_big", "build_id=%s max_bytes=%zu", id, d->max_bytes);
        return DEBUGINFO_MISSING; /* remembered: the next query does not download it again */
    }
    if (time_now_ns() > t.deadline_ns) {
        /* A late answer is not a missing file: the next query asks again. */
        drop_download(d->downloads, id);
        log_event(LOG_WARN, "symbolize.debuginfod_late", "build_id=%s", id);
        return DEBUGINFO_LATE;
    }
    log_event(LOG_INFO, "symbolize.debuginfod_missing", "build_id=%s err=%s", id, strerror(-fd));
    return DEBUGINFO_MISSING;
}

int debuginfo_find_source(debuginfo_t *d, const char *id, const char *path, size_t max, int64_t deadline_ns,
                          buf_t *out) {
    if (!d->debuginfod || !build_id_valid(id) || !path || path[0] != '/') return -1; /* debuginfod wants absolute */
    debuginfod_client *c = debuginfod_begin();
    if (!c) return -1;
    transfer_t t = {deadline_ns ? deadline_ns : time_now_ns() + NO_DEADLINE_WAIT_NS, max, 0};
    debuginfod_set_user_data(c, &t);
    debuginfod_set_progressfn(c, on_progress);
    char *got = NULL;
    int fd = debuginfod_find_source(c, (const unsigned char *)id, 0, path, &got);
    debuginfod_end(c);
    free(got);
    if (fd < 0) return -1;
    int rc = lseek(fd, 0, SEEK_SET) == 0 ? 0 : -1; /* a fresh download's descriptor is at its end */
    char chunk[65536];
    for (ssize_t n; rc == 0 && (n = read(fd, chunk, sizeof chunk)) != 0;) {
        if (n < 0 || out->len + (size_t)n > max) rc = -1;
        else buf_append(out, chunk, (size_t)n);
    }
    close(fd);
    log_event(LOG_INFO, "symbolize.debuginfod_source", "build_id=%s path=%s found=%d", id, path, rc == 0);
    return rc == 0 && !out->oom ? 0 : -1;
}

static int fetch_shared_sources(debuginfo_t *d, const char *id, char *path, size_t cap);
static debuginfo_found_t fetch_object(debuginfo_t *d, const char *id, debuginfo_kind_t kind, char *path, size_t cap);

int debuginfo_find_uploaded_source(debuginfo_t *d, const char *id, const char *path, size_t max, int64_t deadline_ns,
                                   buf_t *out) {
    char archive[PATH_CAP];
    snprintf(archive, sizeof archive, "%s/%s.sources", d->uploads, id);
    if (!build_id_valid(id)) return 1;
    if (!is_file(archive) && !fetch_shared_sources(d, id, archive, sizeof archive)) return 1;
    return source_archive_find(archive, path, max, d->max_bytes ? d->max_bytes : UINT64_MAX, deadline_ns, out);
}

/* The remembered-missing entry of id, or NULL; d->mu held. */
static missing_t *missing_of(debuginfo_t *d, const char *id) {
    for (size_t i = 0; i < d->nmissing; i++)
        if (!strcmp(d->missing[i].id, id)) return &d->missing[i];
    return NULL;
}

/* What is remembered of id: MISSING, LATE (a download that timed out a moment ago), or
 * FOUND for "nothing: ask". */
static debuginfo_found_t remembered(debuginfo_t *d, const char *id) {
    pthread_mutex_lock(&d->mu);
    missing_t *m = missing_of(d, id);
    int fresh = m && m->generation == debuginfo_generation(d) && time_now_ns() < m->until_ns;
    debuginfo_found_t f = !fresh ? DEBUGINFO_FOUND : m->late ? DEBUGINFO_LATE : DEBUGINFO_MISSING;
    pthread_mutex_unlock(&d->mu);
    return f;
}

static void remember(debuginfo_t *d, const char *id, debuginfo_found_t f) {
    int64_t ttl = f == DEBUGINFO_LATE && d->negative_ttl_ns > LATE_TTL_NS ? LATE_TTL_NS : d->negative_ttl_ns;
    pthread_mutex_lock(&d->mu);
    missing_t *m = missing_of(d, id);
    if (!m && VEC_RESERVE(d->missing, d->missing_cap, d->nmissing + 1) == 0) m = &d->missing[d->nmissing++];
    if (m) { /* out of memory: not remembered, asked again next time */
        snprintf(m->id, sizeof m->id, "%s", id);
        m->until_ns = time_now_ns() + ttl;
        m->generation = debuginfo_generation(d);
        m->late = f == DEBUGINFO_LATE;
    }
    pthread_mutex_unlock(&d->mu);
}

/* The sources archive of id from the object store (cluster mode), its misses remembered
 * as a debug file's are: 1 when it is now at path. */
static int fetch_shared_sources(debuginfo_t *d, const char *id, char *path, size_t cap) {
    char key[300];
    snprintf(key, sizeof key, "%.200s.sources", id);
    if (!d->objects || remembered(d, key) != DEBUGINFO_FOUND) return 0;
    debuginfo_found_t f = fetch_object(d, id, DEBUGINFO_SOURCES, path, cap);
    if (f != DEBUGINFO_FOUND) remember(d, key, f);
    return f == DEBUGINFO_FOUND;
}

debuginfo_found_t debuginfo_find_local(debuginfo_t *d, const char *id, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", d->uploads, id);
    if (is_file(path) || find_local(d, id, path, cap)) return DEBUGINFO_FOUND;
    return DEBUGINFO_MISSING;
}

int debuginfo_remote(const debuginfo_t *d) { return d->debuginfod || d->objects; }

debuginfo_found_t debuginfo_find(debuginfo_t *d, const char *id, int64_t deadline_ns, char *path, size_t cap) {
    if (debuginfo_find_local(d, id, path, cap) == DEBUGINFO_FOUND) return DEBUGINFO_FOUND;
    if (!debuginfo_remote(d)) return DEBUGINFO_MISSING;
    debuginfo_found_t f = remembered(d, id);
    if (f != DEBUGINFO_FOUND) return f;
    f = d->objects ? fetch_object(d, id, DEBUGINFO_BINARY, path, cap) : DEBUGINFO_MISSING;
    if (f == DEBUGINFO_MISSING && d->debuginfod) f = fetch(d, id, deadline_ns, path, cap);
    if (f != DEBUGINFO_FOUND) remember(d, id, f);
    return f;
}

/* What an upload of a kind is kept as under DATA/debuginfo: the debug file as ID, the
 * sources archive as ID.sources. */
static void upload_name(const char *id, debuginfo_kind_t kind, char *out, size_t cap) {
    snprintf(out, cap, "%s%s", id, kind == DEBUGINFO_SOURCES ? ".sources" : "");
}

/* Who uploaded a file (name: upload_name's): DATA/debuginfo/NAME.owner holds the
 * tenant. A file with no owner record (stored before owners were kept) belongs to
 * nobody in particular. */
static void owner_path(const debuginfo_t *d, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s.owner", d->uploads, name);
}

/* 1 when the upload name belongs to tenant, or to nobody (no owner record). */
static int owned_by(const debuginfo_t *d, const char *name, const char *tenant) {
    char path[PATH_CAP], owner[130] = "";
    owner_path(d, name, path, sizeof path);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(owner, 1, sizeof owner - 1, f) : 0;
    if (f) fclose(f);
    owner[n] = 0;
    return !n || !strcmp(owner, tenant);
}

/* 0 when tenant may replace or delete the upload name: there is none, or it is its own. */
static int may_touch(const debuginfo_t *d, const char *name, const char *tenant, hr_err_t *err) {
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", d->uploads, name);
    if (!is_file(path) || owned_by(d, name, tenant)) return 0;
    return hr_fail(err, HR_EDENIED,
                   "%s was uploaded by another tenant: only it may replace or delete the file (which symbolizes "
                   "your profiles too)",
                   name);
}

/* Puts the checked file at path in place as the upload name, owned by tenant. d->mu
 * held. The owner is recorded first, so no file is ever in place without its owner; if
 * the file then cannot be put in place, a new owner record goes again. */
static int put_in_place(debuginfo_t *d, const char *name, const char *path, const char *tenant, hr_err_t *err) {
    char dst[PATH_CAP], own[PATH_CAP];
    snprintf(dst, sizeof dst, "%s/%s", d->uploads, name);
    owner_path(d, name, own, sizeof own);
    int existed = is_file(dst);
    if (may_touch(d, name, tenant, err) || fs_write_atomic(own, tenant, strlen(tenant), err)) {
        if (!existed) unlink(own); /* a half-written record, if any */
        return -1;
    }
    if (rename(path, dst)) {
        hr_fail(err, HR_EIO, "cannot store %s: %s", dst, strerror(errno));
        if (!existed) unlink(own);
        return -1;
    }
    atomic_fetch_add(&d->generation, 1); /* in place: even if the sync below fails, it is there */
    return fs_sync_parent(dst, err);
}

int debuginfo_store(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, const void *p, size_t n,
                    hr_err_t *err) {
    char tmp[PATH_CAP]; /* spooled as http.c spools a body, then stored as it is */
    snprintf(tmp, sizeof tmp, "%s/.upload-XXXXXX", d->uploads);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return hr_fail(err, HR_EIO, "cannot store the upload: %s", strerror(errno));
    int rc = fs_write_all(fd, p, n, tmp, err);
    close(fd);
    if (rc == 0) rc = debuginfo_store_file(d, id, kind, tenant, tmp, err);
    if (rc) unlink(tmp);
    return rc;
}

const char *debuginfo_spool_dir(const debuginfo_t *d) { return d->uploads; }

/* An upload's contents are what its kind says: a debug file proves its build ID, an
 * archive reads through within the limits. */
static int check_upload(const debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *path, hr_err_t *err) {
    if (kind == DEBUGINFO_BINARY) return buildid_check_file(path, id, err);
    size_t files = 0;
    return source_archive_check(path, d->max_bytes ? d->max_bytes : UINT64_MAX, &files, err);
}

/* ---- cluster mode: uploads shared through the object store ---- */

static void object_key(const char *name, const char *suffix, char *out, size_t cap) {
    snprintf(out, cap, "debuginfo/%s%s", name, suffix);
}

/* Whether the shared upload name exists (*exists), its size (*size, may be NULL) and who
 * owns it (owner[cap], "" for nobody; owner NULL: not read). 0, or -1 with err when the
 * store cannot say. */
static int shared_owner(const debuginfo_t *d, const char *name, int *exists, uint64_t *size, char *owner, size_t cap,
                        hr_err_t *err) {
    char key[PATH_CAP];
    uint64_t n = 0;
    buf_t b;
    object_key(name, "", key, sizeof key);
    *exists = 0;
    if (owner) owner[0] = 0;
    hr_err_t e = {0};
    if (objstore_head(d->objects, key, &n, &e)) return e.code == HR_ENOTFOUND ? 0 : (*err = e, -1);
    *exists = 1;
    if (size) *size = n;
    if (!owner) return 0;
    object_key(name, ".owner", key, sizeof key);
    buf_init(&b);
    int rc = objstore_get(d->objects, key, cap - 1, &b, &e);
    if (rc == 0) snprintf(owner, cap, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    buf_free(&b);
    return rc == 0 || e.code == HR_ENOTFOUND ? 0 : (*err = e, -1);
}

/* 0 when tenant may replace or delete the shared upload name. */
static int may_touch_shared(const debuginfo_t *d, const char *name, const char *tenant, int *exists, hr_err_t *err) {
    char owner[130];
    if (shared_owner(d, name, exists, NULL, owner, sizeof owner, err)) return -1;
    if (!*exists || !owner[0] || !strcmp(owner, tenant)) return 0;
    return hr_fail(err, HR_EDENIED,
                   "%s was uploaded by another tenant: only it may replace or delete the file (which symbolizes "
                   "your profiles too)",
                   name);
}

/* Writes the checked upload at path to the object store as name, owner first (as
 * put_in_place orders it), once the shared copy's owner allows it. */
static int publish(debuginfo_t *d, const char *name, const char *path, const char *tenant, hr_err_t *err) {
    char key[PATH_CAP];
    int exists;
    if (may_touch_shared(d, name, tenant, &exists, err)) return -1;
    object_key(name, ".owner", key, sizeof key);
    if (objstore_put(d->objects, key, tenant, strlen(tenant), 0, err)) return -1;
    object_key(name, "", key, sizeof key);
    return objstore_put_file(d->objects, key, path, 0, err) ? -1 : 0;
}

/* Downloads the object key into the open file fd, size bytes, a chunk per request. */
static int download(const debuginfo_t *d, const char *key, uint64_t size, int fd, const char *path, hr_err_t *err) {
    buf_t b;
    buf_init(&b);
    int rc = 0;
    for (uint64_t off = 0; rc == 0 && off < size; off += OBJECT_CHUNK) {
        objstore_range_t r = {off, size - off < OBJECT_CHUNK ? size - off : OBJECT_CHUNK};
        b.len = 0;
        rc = objstore_get_ranges(d->objects, key, &r, 1, &b, err) || fs_write_all(fd, b.data, b.len, path, err);
    }
    buf_free(&b);
    return rc ? -1 : 0;
}

/* A shared upload of id another node stored: downloaded into the uploads folder with its
 * owner record, checked as an upload is (a damaged read proves no build ID and is not
 * kept), and put in place. FOUND with its path, MISSING, or LATE when the store failed
 * (asked again after LATE_TTL_NS). */
static debuginfo_found_t fetch_object(debuginfo_t *d, const char *id, debuginfo_kind_t kind, char *path, size_t cap) {
    char name[300], key[PATH_CAP], tmp[PATH_CAP], owner[130];
    int exists;
    uint64_t size = 0;
    hr_err_t err = {0};
    upload_name(id, kind, name, sizeof name);
    object_key(name, "", key, sizeof key);
    if (shared_owner(d, name, &exists, &size, owner, sizeof owner, &err)) {
        log_event(LOG_WARN, "symbolize.shared_debuginfo_unreadable", "name=%s err=\"%s\"", name, err.msg);
        return DEBUGINFO_LATE;
    }
    if (!exists) return DEBUGINFO_MISSING;
    if ((d->max_bytes && size > d->max_bytes) || debuginfo_room(d, size, 0, &err)) {
        log_event(LOG_WARN, "symbolize.shared_debuginfo_no_room", "name=%s bytes=%llu err=\"%s\"", name,
                  (unsigned long long)size, err.code ? err.msg : "over --max-debuginfo-bytes");
        return DEBUGINFO_MISSING;
    }
    snprintf(tmp, sizeof tmp, "%s/.upload-XXXXXX", d->uploads);
    int fd = mkostemp(tmp, O_CLOEXEC), rc = fd < 0 ? hr_fail(&err, HR_EIO, "%s", strerror(errno)) : 0;
    if (rc == 0) rc = download(d, key, size, fd, tmp, &err);
    if (fd >= 0) close(fd);
    if (rc == 0) rc = check_upload(d, id, kind, tmp, &err);
    char dst[PATH_CAP], own[PATH_CAP];
    snprintf(dst, sizeof dst, "%s/%s", d->uploads, name);
    owner_path(d, name, own, sizeof own);
    pthread_mutex_lock(&d->mu);
    if (rc == 0 && owner[0]) rc = fs_write_atomic(own, owner, strlen(owner), &err);
    if (rc == 0 && rename(tmp, dst)) rc = hr_fail(&err, HR_EIO, "cannot store %s: %s", dst, strerror(errno));
    if (rc == 0) atomic_fetch_add(&d->generation, 1);
    pthread_mutex_unlock(&d->mu);
    if (rc) {
        if (fd >= 0) unlink(tmp);
        log_event(LOG_WARN, "symbolize.shared_debuginfo_unreadable", "name=%s err=\"%s\"", name, err.msg);
        return err.code == HR_EIO ? DEBUGINFO_LATE : DEBUGINFO_MISSING;
    }
    log_event(LOG_INFO, "symbolize.shared_debuginfo_fetched", "name=%s bytes=%llu", name, (unsigned long long)size);
    snprintf(path, cap, "%s", dst);
    return DEBUGINFO_FOUND;
}

/* Deletes the shared copy of name (owner last, as put_in_place orders the reverse):
 * 0 with *existed, or -1 with err. */
static int unpublish(debuginfo_t *d, const char *name, const char *tenant, int *existed, hr_err_t *err) {
    char key[PATH_CAP];
    if (may_touch_shared(d, name, tenant, existed, err)) return -1;
    if (!*existed) return 0;
    object_key(name, "", key, sizeof key);
    if (objstore_delete(d->objects, key, err)) return -1;
    object_key(name, ".owner", key, sizeof key);
    return objstore_delete(d->objects, key, err);
}

int debuginfo_has(debuginfo_t *d, const char *id, debuginfo_kind_t kind) {
    char name[300], path[PATH_CAP];
    int exists = 0;
    hr_err_t err = {0};
    upload_name(id, kind, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", d->uploads, name);
    if (is_file(path)) return 1;
    return d->objects && shared_owner(d, name, &exists, NULL, NULL, 0, &err) == 0 && exists;
}

int debuginfo_store_file(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, const char *path,
                         hr_err_t *err) {
    if (check_upload(d, id, kind, path, err)) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = fd < 0 || fsync(fd) ? hr_fail(err, HR_EIO, "cannot sync the upload: %s", strerror(errno)) : 0;
    if (fd >= 0) close(fd);
    char name[300];
    upload_name(id, kind, name, sizeof name);
    /* Shared first: a file every node can read is what the upload's 200 promises. */
    if (rc == 0 && d->objects) rc = publish(d, name, path, tenant, err);
    pthread_mutex_lock(&d->mu);
    if (rc == 0) rc = put_in_place(d, name, path, tenant, err);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int debuginfo_delete(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, hr_err_t *err) {
    char name[300], path[PATH_CAP];
    int shared = 0;
    upload_name(id, kind, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", d->uploads, name);
    if (d->objects && unpublish(d, name, tenant, &shared, err)) return -1;
    pthread_mutex_lock(&d->mu);
    int rc = may_touch(d, name, tenant, err);
    if (rc == 0 && unlink(path) && !(errno == ENOENT && shared))
        rc = errno == ENOENT ? hr_fail(err, HR_ENOTFOUND, "no %s uploaded for build ID %s",
                                       kind == DEBUGINFO_SOURCES ? "sources" : "debug info", id)
                             : hr_fail(err, HR_EIO, "cannot delete %s: %s", path, strerror(errno));
    if (rc == 0) {
        owner_path(d, name, path, sizeof path);
        unlink(path);
        atomic_fetch_add(&d->generation, 1);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The shared uploads as a listing reads them: names (relative to debuginfo/) and sizes. */
typedef struct {
    char **names;
    uint64_t *sizes;
    size_t n, cap;
    int oom;
} shared_list_t;

static int on_shared(void *ctx, const char *key, uint64_t size) {
    shared_list_t *l = ctx;
    char *name = strdup(key + strlen("debuginfo/"));
    if (!name || VEC_RESERVE(l->names, l->cap, l->n + 1) ||
        !(l->sizes = realloc(l->sizes, l->cap * sizeof *l->sizes))) {
        free(name);
        return l->oom = 1;
    }
    l->sizes[l->n] = size;
    l->names[l->n++] = name;
    return 0;
}

/* The size of the listed name, or -1 when it is not listed. */
static int64_t shared_size(const shared_list_t *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return (int64_t)l->sizes[i];
    return -1;
}

/* Cluster mode's listing: the object store's uploads (in key order) that tenant owns
 * or nobody does, one owner record read per file. No upload time: a listing does not
 * carry it. */
static int list_shared_json(debuginfo_t *d, const char *tenant, buf_t *out, hr_err_t *err) {
    shared_list_t l = {0};
    int rc = objstore_list(d->objects, "debuginfo/", on_shared, &l, err);
    if (rc == 0 && l.oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    buf_putc(out, '[');
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        char owner[130], sources[300];
        int exists;
        if (!build_id_valid(l.names[i])) continue; /* ID.owner, ID.sources */
        if ((rc = shared_owner(d, l.names[i], &exists, NULL, owner, sizeof owner, err)) ||
            (owner[0] && strcmp(owner, tenant)))
            continue;
        buf_printf(out, "%s{\"build_id\":\"%s\",\"size\":%llu", out->data[out->len - 1] == '[' ? "" : ",", l.names[i],
                   (unsigned long long)l.sizes[i]);
        upload_name(l.names[i], DEBUGINFO_SOURCES, sources, sizeof sources);
        int64_t ss = shared_size(&l, sources);
        if (ss >= 0 && (rc = shared_owner(d, sources, &exists, NULL, owner, sizeof owner, err)) == 0 &&
            (!owner[0] || !strcmp(owner, tenant)))
            buf_printf(out, ",\"sources_size\":%lld", (long long)ss);
        buf_putc(out, '}');
    }
    buf_putc(out, ']');
    for (size_t i = 0; i < l.n; i++) free(l.names[i]);
    free(l.names);
    free(l.sizes);
    if (rc == 0 && out->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    return rc;
}

int debuginfo_list_json(debuginfo_t *d, const char *tenant, buf_t *out, hr_err_t *err) {
    if (d->objects) return list_shared_json(d, tenant, out, err);
    DIR *dir = opendir(d->uploads);
    if (!dir) return hr_fail(err, HR_EIO, "cannot read %s", d->uploads);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (!build_id_valid(e->d_name) || !owned_by(d, e->d_name, tenant)) continue; /* ., .., temporary files */
        char *s = strdup(e->d_name);
        if (!s || VEC_RESERVE(names, cap, n + 1)) {
            free(s);
            rc = hr_fail(err, HR_ENOMEM, "out of memory");
            break;
        }
        names[n++] = s;
    }
    closedir(dir);
    if (rc == 0 && n) qsort(names, n, sizeof *names, cmp_str); /* qsort(NULL, 0) is undefined */
    buf_putc(out, '[');
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char path[PATH_CAP], when[64] = "";
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", d->uploads, names[i]);
        if (stat(path, &st)) continue;
        struct tm tm;
        gmtime_r(&st.st_mtime, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        buf_printf(out, "%s{\"build_id\":\"%s\",\"size\":%lld,\"uploaded\":\"%s\"",
                   out->data[out->len - 1] == '[' ? "" : ",", names[i], (long long)st.st_size, when);
        char sources[300];
        upload_name(names[i], DEBUGINFO_SOURCES, sources, sizeof sources);
        snprintf(path, sizeof path, "%s/%s", d->uploads, sources);
        if (stat(path, &st) == 0 && owned_by(d, sources, tenant))
            buf_printf(out, ",\"sources_size\":%lld", (long long)st.st_size);
        buf_putc(out, '}');
    }
    buf_putc(out, ']');
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc == 0 && out->oom) rc = hr_fail(err, HR_ENOMEM, "out of memory");
    return rc;
}
