/* retention.c - store_apply_retention (store.h): deleting blocks older than
 * --retention, a day block at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "storage/store_impl.h"

int store_apply_retention(store_t *s, int64_t now, hr_err_t *err) {
    if (s->cfg.retention_ns <= 0) return 0;
    int64_t cutoff = now - s->cfg.retention_ns;
    if (store_sync(s, err)) return -1; /* a cluster: another node may have deleted some already */
    /* Cuts add blocks under `cutting` and compaction replaces them under `compact`, so
     * holding both keeps the list stable while the catalog is updated; readers are
     * excluded only for the in-memory swap, ingest never. */
    pthread_mutex_lock(&s->compact);
    pthread_mutex_lock(&s->cutting);
    size_t n = 0;
    int64_t *ids = malloc((s->nblocks ? s->nblocks : 1) * sizeof *ids);
    int rc = ids ? 0 : hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < s->nblocks; i++)
        if (s->blocks[i].meta.max_time < cutoff) ids[n++] = s->blocks[i].meta.id;
    if (rc == 0 && n) rc = index_remove_blocks(s->index, ids, n, err);
    if (rc == 0 && n) {
        block_meta_t *gone = malloc(n * sizeof *gone);
        size_t np = 0;
        pthread_rwlock_wrlock(&s->data);
        pthread_mutex_lock(&s->cache_mu);
        size_t k = 0;
        for (size_t i = 0; i < s->nblocks; i++) {
            block_t *b = &s->blocks[i];
            if (b->meta.max_time >= cutoff) {
                s->blocks[k++] = *b;
                continue;
            }
            if (gone) gone[np++] = b->meta;
            bcache_drop_locked(s, b);
        }
        s->nblocks = k;
        s->retention_deleted += n;
        pthread_mutex_unlock(&s->cache_mu);
        pthread_rwlock_unlock(&s->data);
        for (size_t i = 0; i < np; i++) store_retire_block(s, &gone[i]); /* after the catalog: crash-safe */
        free(gone);
        log_info("retention.deleted", "blocks=%zu older_than_ns=%lld", n, (long long)cutoff);
    }
    pthread_mutex_unlock(&s->cutting);
    pthread_mutex_unlock(&s->compact);
    free(ids);
    return rc ? -1 : (int)n;
}
