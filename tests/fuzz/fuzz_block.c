/* fuzz_block.c - libFuzzer harness: block files (whole, and partitions read through a window), symbol and
 * function tables and merge shares from untrusted bytes. */
#include "storage/block.h"
#include "query/share.h"
#include "storage/functab.h"

#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} mem_t;

static int mem_read(void *ctx, const char *name, uint64_t off, uint64_t len, uint8_t *out, hr_err_t *err) {
    const mem_t *m = ctx;
    (void)name;
    if (off > m->n || len > m->n - off) return hr_fail(err, HR_EUNPROC, "short");
    memcpy(out, m->p + off, (size_t)len);
    return 0;
}

/* Each partition's rows read through a window in the middle of its range (decoding
 * the rows in it, stepping over the others' samples). */
static void window_reads(const uint8_t *data, size_t n) {
    hr_err_t err = {0};
    mem_t m = {data, n};
    block_src_t src = {"fuzz", n, mem_read, &m};
    block_index_t *ix = block_index_read_src(&src, &err);
    for (size_t p = 0; ix && ix->version == 2 && p < ix->nparts; p++) {
        const block_part_t *bp = &ix->parts[p];
        if (bp->min_time > bp->max_time) continue;
        uint64_t span = (uint64_t)bp->max_time - (uint64_t)bp->min_time;
        block_window_t w = {bp->min_time + (int64_t)(span / 3), bp->max_time - (int64_t)(span / 3)};
        segment_free(block_read_part_src(&src, ix, p, BLOCK_VIEW_ROWS, &w, &err));
        /* Read with the stack fingerprints instead of the symbols, then those decoded. */
        for (int view = 0; view < 2; view++) {
            segment_t *s = block_read_part_src(&src, ix, p, view | BLOCK_VIEW_DEFER_SYMBOLS, NULL, &err);
            segment_t *syms = s ? block_read_part_src(&src, ix, p, BLOCK_VIEW_SYMBOLS, NULL, &err) : NULL;
            if (syms) block_part_symbols(s, syms, &err);
            segment_free(s);
        }
    }
    block_index_free(ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    hr_err_t err = {0};
    segment_free(block_decode(data, n, &err));
    window_reads(data, n);
    symtab_free(symtab_decode(data, n, &err));
    static const uint32_t series[4] = {1, 2, 3, 4};
    size_t nseries = n ? data[0] % 5 : 0;
    functab_free(functab_decode(data, n, series, nseries, 0, &err));      /* a FUNCS section, names inline */
    functab_t *apart = functab_decode(data, n, series, nseries, 1, &err); /* ... names by fingerprint */
    if (apart) functab_decode_names(apart, data, n, &err);                /* and a NAMES section for them */
    functab_free(apart);
    share_t s;
    share_decode(data, n, &s, &err); /* a peer's merge share */
    share_destroy(&s);
    return 0;
}
