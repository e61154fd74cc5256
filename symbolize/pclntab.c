/* pclntab.c - see pclntab.h.
 *
 * The table starts with a header (magic, pc quantum, pointer size, counts and the
 * offsets of its sub-tables, all relative to the table's start), then the function
 * table: nfunc+1 (entry, offset of _func) pairs sorted by entry, the last one the end
 * of the text. A _func record holds the offset of its name and of its pc->file and
 * pc->line tables; those are varint-coded runs of (value delta, pc delta) that start
 * at the function's entry with value -1. Since Go 1.16 file numbers go through a
 * per-compilation-unit table (cutab) to the file name table.
 *
 * Every read goes through rd32/rd64/cstr, which check the offset against the table's
 * length, so the reader trusts no count or offset in the file. */
#include "symbolize/pclntab.h"

#include <stdlib.h>
#include <string.h>

enum { GO116 = 1, GO118, GO120 };

struct pclntab {
    const uint8_t *p;
    size_t n;
    int version;
    unsigned quantum, ptrsize;
    uint64_t nfunc, text_start;
    uint64_t funcname, cutab, filetab, pctab, functab; /* offsets in p */
};

static int in_range(const pclntab_t *t, uint64_t off, uint64_t len) { return off <= t->n && len <= t->n - off; }

static int rd32(const pclntab_t *t, uint64_t off, uint32_t *v) {
    if (!in_range(t, off, 4)) return -1;
    const uint8_t *q = t->p + off;
    *v = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    return 0;
}

/* A pointer-sized word (4 or 8 bytes, little-endian). */
static int rdword(const pclntab_t *t, uint64_t off, uint64_t *v) {
    uint32_t lo, hi = 0;
    if (rd32(t, off, &lo) || (t->ptrsize == 8 && rd32(t, off + 4, &hi))) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

/* The NUL-terminated string at off, or NULL when it runs off the table. */
static const char *cstr(const pclntab_t *t, uint64_t off) {
    if (off >= t->n || !memchr(t->p + off, 0, t->n - off)) return NULL;
    return (const char *)t->p + off;
}

pclntab_t *pclntab_open(const uint8_t *data, size_t n, hr_err_t *err) {
    pclntab_t h = {.p = data, .n = n};
    uint32_t magic;
    if (n < 8 || rd32(&h, 0, &magic) || data[4] || data[5]) {
        hr_fail(err, HR_EUNPROC, "pclntab: too short");
        return NULL;
    }
    h.version = magic == 0xfffffffa ? GO116 : magic == 0xfffffff0 ? GO118 : magic == 0xfffffff1 ? GO120 : 0;
    h.quantum = data[6], h.ptrsize = data[7];
    if (!h.version) {
        hr_fail(err, HR_EUNPROC, "pclntab: unsupported magic 0x%08x (Go 1.16 or later is read)", magic);
        return NULL;
    }
    if ((h.ptrsize != 4 && h.ptrsize != 8) || h.quantum == 0 || h.quantum > 4) {
        hr_fail(err, HR_EUNPROC, "pclntab: bad pointer size %u or quantum %u", h.ptrsize, h.quantum);
        return NULL;
    }
    /* Header words after the first 8 bytes: nfunc, nfiles, [textStart,] funcname, cu,
     * filetab, pctab, functab. */
    uint64_t w[8];
    int nw = h.version == GO116 ? 7 : 8;
    for (int i = 0; i < nw; i++)
        if (rdword(&h, 8 + (uint64_t)i * h.ptrsize, &w[i])) {
            hr_fail(err, HR_EUNPROC, "pclntab: truncated header");
            return NULL;
        }
    int k = 2;
    h.nfunc = w[0];
    if (h.version != GO116) h.text_start = w[k++];
    h.funcname = w[k++], h.cutab = w[k++], h.filetab = w[k++], h.pctab = w[k++], h.functab = w[k++];
    uint64_t entry_size = h.version == GO116 ? 2ull * h.ptrsize : 8;
    if (h.nfunc == 0 || h.nfunc > n / entry_size || !in_range(&h, h.functab, (h.nfunc + 1) * entry_size) ||
        h.funcname > n || h.cutab > n || h.filetab > n || h.pctab > n) {
        hr_fail(err, HR_EUNPROC, "pclntab: function table out of bounds");
        return NULL;
    }
    pclntab_t *t = malloc(sizeof *t);
    if (!t) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    *t = h;
    return t;
}

void pclntab_free(pclntab_t *t) { free(t); }

/* Entry pc and _func offset of function i of the function table. */
static int functab_entry(const pclntab_t *t, uint64_t i, uint64_t *entry, uint64_t *func) {
    if (t->version == GO116) {
        uint64_t off = t->functab + i * 2 * t->ptrsize;
        if (rdword(t, off, entry) || rdword(t, off + t->ptrsize, func)) return -1;
    } else {
        uint32_t e, f;
        uint64_t off = t->functab + i * 8;
        if (rd32(t, off, &e) || rd32(t, off + 4, &f)) return -1;
        *entry = t->text_start + e, *func = f;
    }
    *func += t->functab;
    return 0;
}

/* One varint of a pc-value table; -1 past the table's end or on an overlong one. */
static int uvarint(const pclntab_t *t, uint64_t *off, uint32_t *v) {
    uint32_t x = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        if (*off >= t->n) return -1;
        uint8_t b = t->p[(*off)++];
        x |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return *v = x, 0;
    }
    return -1;
}

/* The value of the pc-value table at pctab+tab for pc in a function starting at
 * entry, as Go's runtime pcvalue computes it; -1 when pc is past the table. */
static int pcvalue(const pclntab_t *t, uint32_t tab, uint64_t entry, uint64_t pc, int32_t *out) {
    if (tab == 0) return -1;
    uint64_t off = t->pctab + tab, cur = entry;
    uint32_t val = UINT32_MAX; /* -1; unsigned, so a hostile run of deltas wraps as Go's int32 does */
    for (int first = 1;; first = 0) {
        uint32_t uv, pcd;
        if (uvarint(t, &off, &uv)) return -1;
        if (uv == 0 && !first) return -1;
        val += -(uv & 1) ^ (uv >> 1);
        if (uvarint(t, &off, &pcd)) return -1;
        cur += (uint64_t)pcd * t->quantum;
        if (pc < cur) return *out = (int32_t)val, 0;
    }
}

/* The _func fields the resolver reads, at their offsets for the table's version. */
typedef struct {
    int32_t nameoff;
    uint32_t pcfile, pcln, cu;
} func_t;

static int read_func(const pclntab_t *t, uint64_t off, func_t *f) {
    uint64_t base = off + (t->version == GO116 ? t->ptrsize : 4); /* after entry / entryOff */
    uint32_t name, pcfile, pcln, cu;
    /* nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cuOffset: 4 bytes each. */
    if (rd32(t, base, &name) || rd32(t, base + 16, &pcfile) || rd32(t, base + 20, &pcln) || rd32(t, base + 28, &cu))
        return -1;
    *f = (func_t){.nameoff = (int32_t)name, .pcfile = pcfile, .pcln = pcln, .cu = cu};
    return 0;
}

static const char *file_name(const pclntab_t *t, const func_t *f, int32_t fileno) {
    uint32_t fo;
    if (fileno < 0 || rd32(t, t->cutab + 4 * ((uint64_t)f->cu + (uint32_t)fileno), &fo) || fo == UINT32_MAX)
        return NULL;
    return cstr(t, t->filetab + fo);
}

int pclntab_resolve(const pclntab_t *t, uint64_t pc, frames_t *out) {
    uint64_t lo = 0, hi = t->nfunc, entry, end, func;
    if (functab_entry(t, 0, &entry, &func) || functab_entry(t, t->nfunc, &end, &func) || pc < entry || pc >= end)
        return 0;
    while (hi - lo > 1) { /* the last function whose entry is <= pc */
        uint64_t mid = lo + (hi - lo) / 2;
        if (functab_entry(t, mid, &entry, &func)) return 0;
        if (entry <= pc) lo = mid;
        else hi = mid;
    }
    func_t f;
    if (functab_entry(t, lo, &entry, &func) || read_func(t, func, &f) || f.nameoff < 0) return 0;
    const char *name = cstr(t, t->funcname + (uint32_t)f.nameoff);
    if (!name) return 0;
    int32_t fileno = -1, line = 0;
    const char *file = pcvalue(t, f.pcfile, entry, pc, &fileno) == 0 ? file_name(t, &f, fileno) : NULL;
    if (pcvalue(t, f.pcln, entry, pc, &line) || line < 0) line = 0;
    return frames_push(out, name, name, file, line) ? -1 : 1;
}
