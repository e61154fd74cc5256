/* debuginfo.h - where the debug file of a build ID comes from.
 *
 * Three sources, tried in this order:
 *   1. uploads, kept under DATA/debuginfo/BUILD_ID (PUT /api/v1/debuginfo/BUILD_ID), and
 *      the sources a build was made from as BUILD_ID.sources (PUT .../BUILD_ID/sources);
 *   2. the local folder --debuginfo-dir: DIR/BUILD_ID, DIR/BUILD_ID.debuginfo or
 *      DIR/BUILD_ID/debuginfo (PPROF_BINARY_PATH's and debuginfod's layouts);
 *   3. debuginfod servers (--debuginfod-urls) through libdebuginfod, downloading into
 *      DATA/debuginfod. Local files come before the network: they cost nothing.
 * Files are keyed by the build ID string the agent sent (lowercase hex), whatever kind
 * of ID it is: a GNU note, or a Go build ID hex-encoded.
 *
 * In a cluster (objects set) uploads are shared: each is written to the object store
 * as debuginfo/NAME with its owner as debuginfo/NAME.owner (NAME: the build ID, or
 * ID.sources) before it is put in place locally, and a node that lacks a file looks
 * there before --debuginfo-dir and debuginfod, downloading it into its uploads folder
 * (checked again: it must carry its build ID), where later lookups find it. Owner
 * checks and deletes go to the object store; a miss is remembered as debuginfod's are
 * (--debuginfod-negative-ttl), so a file uploaded on another node is found within that
 * time. A file another node already downloaded stays there when it is replaced or
 * deleted elsewhere, until that node restarts with an empty data folder.
 *
 * A build ID that no source has is remembered for --debuginfod-negative-ttl, so a
 * query does not ask the servers again for every missing binary, and one whose download
 * timed out for 30 s; an upload or delete bumps the generation, which forgets every such
 * answer. Thread-safe. */
#ifndef HEARTH_DEBUGINFO_H
#define HEARTH_DEBUGINFO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "remote/objstore.h"

typedef struct debuginfo debuginfo_t;

typedef struct {
    const char *data_dir;        /* uploads and downloads live under it */
    const char *local_dir;       /* --debuginfo-dir; "" for none */
    const char *debuginfod_urls; /* space-separated; "" for none */
    int64_t negative_ttl_ns;     /* how long a missing build ID is not asked again */
    size_t max_bytes;            /* a debuginfod download past this is cut off (--max-debuginfo-bytes;
                                  * 0 = no limit) and the build ID remembered as missing */
    uint64_t quota;              /* bytes all debug files may take (--debuginfo-quota; 0 = no limit) */
    uint64_t keep_free;          /* free bytes they never take from the disk (--debuginfo-keep-free) */
    objstore_t *objects;         /* cluster mode: uploads are shared through it; NULL on one node */
} debuginfo_config_t;

/* Creates the folders. With URLs it sets DEBUGINFOD_URLS and DEBUGINFOD_CACHE_PATH
 * for libdebuginfod, which reads only its environment: call before starting threads.
 * NULL with err when a folder cannot be made. */
debuginfo_t *debuginfo_new(const debuginfo_config_t *cfg, hr_err_t *err);
void debuginfo_free(debuginfo_t *d);

/* 1 when id is 2-256 lowercase or uppercase hex digits, an even number of them. */
int build_id_valid(const char *id);

typedef enum { DEBUGINFO_FOUND = 1, DEBUGINFO_MISSING = 0, DEBUGINFO_LATE = -1 } debuginfo_found_t;

/* Finds a file for id (valid) and writes its path to path[cap]. LATE when the
 * deadline (wall clock ns; 0 = none) ended a debuginfod download, or one did a moment
 * ago (remembered for 30 s, so repeats do not each wait on the same silent server). */
debuginfo_found_t debuginfo_find(debuginfo_t *d, const char *id, int64_t deadline_ns, char *path, size_t cap);

/* The same without the network: uploads and --debuginfo-dir only. */
debuginfo_found_t debuginfo_find_local(debuginfo_t *d, const char *id, char *path, size_t cap);

/* Source file `path` (as the debug info names it) of binary id from the debuginfod
 * servers (/buildid/ID/source/PATH), at most max bytes, into out. 0, or -1 when no
 * server has it, it is larger, or the deadline (wall clock ns) passed. */
int debuginfo_find_source(debuginfo_t *d, const char *id, const char *path, size_t max, int64_t deadline_ns,
                          buf_t *out);

/* Source file `path` of binary id from the sources archive uploaded for it
 * (source_archive.h), at most max bytes, replacing out: 0, 1 when there is no archive
 * or it has no such file, -1 when it cannot be read or the deadline passed. */
int debuginfo_find_uploaded_source(debuginfo_t *d, const char *id, const char *path, size_t max, int64_t deadline_ns,
                                   buf_t *out);

/* 1 when debuginfod servers or an object store are configured (debuginfo_find may then
 * wait on the network). */
int debuginfo_remote(const debuginfo_t *d);

/* What an upload is: the debug file of a build ID (kept as ID), or the sources it was
 * built from as one archive (ID.sources, source_archive.h). */
typedef enum { DEBUGINFO_BINARY, DEBUGINFO_SOURCES } debuginfo_kind_t;

/* Stores an upload of tenant as id's file of kind: checked (a debug file proves build
 * ID id, buildid.h; an archive reads through within --max-debuginfo-bytes unpacked),
 * written to a temporary file, fsynced, renamed over any previous one. HR_EINVAL when
 * the bytes are not what the kind says or are another binary's, HR_EDENIED when another
 * tenant uploaded it, HR_EIO on a write error. Files serve every tenant's queries; the
 * uploading tenant alone may replace or delete one. */
int debuginfo_store(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, const void *p, size_t n,
                    hr_err_t *err);
/* The folder an upload's body is spooled to while it arrives (http.h spool_dir): the
 * uploads folder itself, so storing it is a rename. Leftovers of a crash (".upload-*")
 * are removed when the store opens. */
const char *debuginfo_spool_dir(const debuginfo_t *d);
/* Stores the spooled upload at path as debuginfo_store stores bytes (path is gone on
 * success). 0, or -1 with debuginfo_store's errors. */
int debuginfo_store_file(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, const char *path,
                         hr_err_t *err);
/* 1 when an upload of kind is stored for id, here or (in a cluster) in the object store. */
int debuginfo_has(debuginfo_t *d, const char *id, debuginfo_kind_t kind);
/* Deletes id's upload of kind: HR_ENOTFOUND when there is none, HR_EDENIED when another
 * tenant uploaded it. */
int debuginfo_delete(debuginfo_t *d, const char *id, debuginfo_kind_t kind, const char *tenant, hr_err_t *err);
/* Whether incoming more bytes of debug files fit: the stored files (uploads and
 * downloads) plus incoming within the quota, and the data disk left with keep_free
 * bytes free after them. spooled: the incoming bytes are on the disk already (a
 * spooled upload), so its free space counts them. 0, or -1 with err (HR_ELIMIT)
 * saying which limit. */
int debuginfo_room(const debuginfo_t *d, uint64_t incoming, int spooled, hr_err_t *err);

/* The uploads tenant made (and those with no owner) as a JSON array of
 * {"build_id","size","uploaded"(RFC 3339)[,"sources_size"]}, sorted by build ID: which binaries another
 * tenant runs is not told. In a cluster, the object store's uploads, without "uploaded". */
int debuginfo_list_json(debuginfo_t *d, const char *tenant, buf_t *out, hr_err_t *err);

/* Bumped by every store and delete: answers computed before it may be stale. */
uint64_t debuginfo_generation(debuginfo_t *d);

#endif
