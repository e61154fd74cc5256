/* elf.c - see elf.h.
 *
 * libdwfl does the heavy lifting (decompressing .zdebug sections, line tables, the
 * DIE tree); this file reports the one file to a Dwfl, asks for DWARF, symbols or
 * the pclntab in that order, and turns DWARF scopes into frames: the scopes of an
 * address run innermost first through inlined subroutines to the subprogram that
 * holds them; the innermost frame's line is the line table's, each outer frame's
 * line is the call site (DW_AT_call_file, DW_AT_call_line) of the frame inside it. */
#include "symbolize/elf.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/vec.h"
#include "symbolize/pclntab.h"

#define MAX_INLINE 64 /* inlined frames reported for one address, outermost kept */

/* One address range of a compilation unit (CU) or of a function in it. */
typedef struct {
    Dwarf_Addr lo, hi; /* [lo, hi) in DWARF addresses (file vaddr) */
    Dwarf_Off die, cu; /* the DIE's offset, and its CU DIE's */
} dw_range_t;

/* Ranges sorted by lo, for finding the DIE that holds an address. */
typedef struct {
    dw_range_t *v;
    size_t n, cap;
} range_table_t;

struct elfobj {
    Dwfl *dwfl;
    Dwarf *dw;              /* NULL without DWARF */
    Dwarf_Addr dwbias;      /* Dwfl address = DWARF address + dwbias */
    range_table_t cus, fns; /* built on the first DWARF lookup */
    int ranges_built;
    Dwfl_Module *mod;
    Dwarf_Addr bias; /* Dwfl address = file vaddr + bias */
    int exec;        /* ET_EXEC */
    GElf_Phdr *loads;
    size_t nloads;
    int have_dwarf, have_symtab;
    pclntab_t *pcln; /* NULL when the file has no readable .gopclntab */
};

/* Debug info lives in the file itself (uploads, debuginfod and local files are
 * already the debug files): never look elsewhere, and never ask a debuginfod server
 * from inside libdwfl, where no deadline reaches. */
static int no_debuginfo(Dwfl_Module *m, void **u, const char *n, Dwarf_Addr a, const char *f, const char *d,
                        GElf_Word c, char **p) {
    (void)m, (void)u, (void)n, (void)a, (void)f, (void)d, (void)c, (void)p;
    return -1;
}

static const Dwfl_Callbacks CALLBACKS = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static int read_loads(elfobj_t *o, Elf *elf) {
    GElf_Ehdr eh;
    size_t n;
    if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &n)) return -1;
    o->exec = eh.e_type == ET_EXEC;
    if (n > 4096) n = 4096; /* real files have a dozen; a hostile count sizes nothing */
    if (!(o->loads = calloc(n ? n : 1, sizeof *o->loads))) return -2;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD) o->loads[o->nloads++] = ph;
    }
    return 0;
}

/* The .gopclntab section's bytes, when the file has them. -1 out of memory (a table
 * that does not read is only logged: the file then has no Go names). */
static int find_pclntab(elfobj_t *o, Elf *elf) {
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx)) return 0;
    for (Elf_Scn *s = elf_nextscn(elf, NULL); s; s = elf_nextscn(elf, s)) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(s, &sh) || sh.sh_type != SHT_PROGBITS) continue;
        if (!(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".gopclntab")) continue;
        Elf_Data *d = elf_getdata(s, NULL);
        hr_err_t err = {0};
        if (d && d->d_buf && d->d_size && !(o->pcln = pclntab_open(d->d_buf, d->d_size, &err))) {
            if (err.code == HR_ENOMEM) return -1;
            log_event(LOG_INFO, "symbolize.pclntab_unread", "err=\"%s\"", err.msg);
        }
        return 0;
    }
    return 0;
}

/* 1 when libelf reads fd as an ELF file with a header. libdwfl leaks the descriptor of a
 * file it does not take for ELF (elfutils 0.188), so such files never reach it. */
static int is_elf(int fd) {
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    GElf_Ehdr eh;
    int ok = e && elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh) != NULL;
    if (e) elf_end(e);
    return ok;
}

/* Compressed sections (SHF_COMPRESSED, or GNU's older .zdebug) say what they inflate
 * to, and libdw inflates the whole section on first use, under the symbolizer's lock. A
 * file of a megabyte can claim gigabytes of zeros, so the claims are checked before any
 * DWARF is read: a section may inflate at most MAX_RATIO times its compressed bytes
 * beyond SMALL_SECTION (real debug info compresses 3-10x), and a file at most
 * MAX_INFLATED in all. */
#define SMALL_SECTION (64ull << 20)
#define MAX_RATIO 100
#define MAX_INFLATED (4ull << 30)

/* What section scn inflates to (0: it is not compressed). */
static uint64_t inflated_size(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, size_t shstr) {
    if (sh->sh_flags & SHF_COMPRESSED) {
        GElf_Chdr ch;
        return gelf_getchdr(scn, &ch) ? ch.ch_size : UINT64_MAX; /* an unreadable header claims the most */
    }
    const char *name = shstr ? elf_strptr(elf, shstr, sh->sh_name) : NULL;
    if (!name || strncmp(name, ".zdebug", 7) || sh->sh_type == SHT_NOBITS) return 0;
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || d->d_size < 12 || memcmp(d->d_buf, "ZLIB", 4)) return UINT64_MAX;
    uint64_t n = 0; /* "ZLIB" and the size as 8 big-endian bytes */
    for (int i = 4; i < 12; i++) n = n << 8 | ((const unsigned char *)d->d_buf)[i];
    return n;
}

static int check_compressed(Elf *elf, hr_err_t *err) {
    size_t shstr = 0;
    if (elf_getshdrstrndx(elf, &shstr)) shstr = 0;
    uint64_t total = 0;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        uint64_t n = inflated_size(elf, scn, &sh, shstr);
        if (!n) continue;
        if (n > SMALL_SECTION && n / MAX_RATIO > sh.sh_size)
            return hr_fail(
                err, HR_EUNPROC,
                "a compressed section claims %llu bytes from %llu (over %dx): refused as a decompression bomb",
                (unsigned long long)n, (unsigned long long)sh.sh_size, MAX_RATIO);
        if ((total += n) > MAX_INFLATED)
            return hr_fail(err, HR_EUNPROC, "compressed sections inflate to over %llu bytes in all",
                           (unsigned long long)MAX_INFLATED);
    }
    return 0;
}

static elfobj_t *open_common(const char *path, int fd, hr_err_t *err) {
    elf_version(EV_CURRENT);
    if (!is_elf(fd)) {
        close(fd);
        hr_fail(err, HR_EUNPROC, "not an ELF file");
        return NULL;
    }
    elfobj_t *o = calloc(1, sizeof *o);
    if (!o || !(o->dwfl = dwfl_begin(&CALLBACKS))) {
        if (fd >= 0) close(fd);
        free(o);
        hr_fail(err, HR_ENOMEM, "out of memory");
        return NULL;
    }
    /* On success the Dwfl owns fd. On failure libdwfl 0.188 sometimes closes it and
     * sometimes leaks it; it is closed here only when it still names the same file, so a
     * number another thread reused meanwhile is left alone. */
    struct stat before, after;
    int have_before = fstat(fd, &before) == 0;
    o->mod = dwfl_report_offline(o->dwfl, "obj", path, fd);
    Elf *elf = NULL;
    if (o->mod) dwfl_report_end(o->dwfl, NULL, NULL);
    else if (have_before && fstat(fd, &after) == 0 && after.st_dev == before.st_dev && after.st_ino == before.st_ino)
        close(fd);
    if (!o->mod || !(elf = dwfl_module_getelf(o->mod, &o->bias))) {
        hr_fail(err, HR_EUNPROC, "not a readable ELF file: %s", dwfl_errmsg(-1));
        elfobj_close(o);
        return NULL;
    }
    int rc = read_loads(o, elf);
    if (rc) {
        hr_fail(err, rc == -2 ? HR_ENOMEM : HR_EUNPROC, rc == -2 ? "out of memory" : "bad ELF header");
        elfobj_close(o);
        return NULL;
    }
    if (check_compressed(elf, err)) {
        elfobj_close(o);
        return NULL;
    }
    o->dw = dwfl_module_getdwarf(o->mod, &o->dwbias);
    o->have_dwarf = o->dw != NULL;
    o->have_symtab = dwfl_module_getsymtab(o->mod) > 0;
    if (find_pclntab(o, elf)) {
        hr_fail(err, HR_ENOMEM, "out of memory");
        elfobj_close(o);
        return NULL;
    }
    return o;
}

elfobj_t *elfobj_open(const char *path, hr_err_t *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        hr_fail(err, HR_EIO, "cannot open %s", path);
        return NULL;
    }
    return open_common(path, fd, err);
}

elfobj_t *elfobj_open_fd(int fd, hr_err_t *err) { return open_common("fd", fd, err); }

void elfobj_close(elfobj_t *o) {
    if (!o) return;
    pclntab_free(o->pcln);
    if (o->dwfl) dwfl_end(o->dwfl);
    free(o->loads);
    free(o->cus.v);
    free(o->fns.v);
    free(o);
}

uint64_t elfobj_normalize(const elfobj_t *o, uint64_t addr, uint64_t start, uint64_t limit, uint64_t offset) {
    if (o->exec || (start == 0 && limit == 0) || addr < start) return addr;
    uint64_t fo = addr - start + offset;
    for (size_t i = 0; i < o->nloads; i++) {
        const GElf_Phdr *ph = &o->loads[i];
        if (fo >= ph->p_offset && fo - ph->p_offset < ph->p_memsz) return fo - ph->p_offset + ph->p_vaddr;
    }
    /* No segment holds it (a debug file whose segments lost their bytes keeps its
     * headers, so this is rare): place it by the first segment. */
    return o->nloads ? fo - o->loads[0].p_offset + o->loads[0].p_vaddr : fo;
}

/* libstdc++'s demangler (C linkage; the binaries link libstdc++ for RE2 already). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

/* A C++ (or legacy Rust) symbol as flame graphs show it, as pprof's simple demangling
 * does: the demangled name without its parameter list and qualifiers, and without
 * Rust's ::h<hash> suffix. malloc'd, or NULL when sym is not mangled or memory ran
 * out (the caller then shows the name as it is). */
static char *demangle(const char *sym) {
    /* Names come from untrusted files, and the demangler recurses: a bound on the input
     * bounds its depth (real symbols are far shorter). */
    if (!sym || strncmp(sym, "_Z", 2) || strnlen(sym, 1025) > 1024) return NULL;
    int status = 0;
    char *d = __cxa_demangle(sym, NULL, NULL, &status);
    if (!d || status) return free(d), NULL;
    size_t n = strlen(d);
    static const char *const QUALIFIERS[] = {" const", " volatile", " &&", " &"};
    for (size_t i = 0; i < sizeof QUALIFIERS / sizeof *QUALIFIERS; i++) {
        size_t q = strlen(QUALIFIERS[i]);
        if (n > q && !strcmp(d + n - q, QUALIFIERS[i])) d[n -= q] = 0, i = (size_t)-1;
    }
    if (n && d[n - 1] == ')') /* the parameter list: from the '(' matching the last ')' */
        for (size_t i = n, depth = 0; i-- > 0;) {
            if (d[i] == ')') depth++;
            else if (d[i] == '(' && --depth == 0) {
                d[n = i] = 0;
                break;
            }
        }
    if (n > 19 && !strncmp(d + n - 19, "::h", 3) && strspn(d + n - 16, "0123456789abcdef") == 16) d[n - 19] = 0;
    return d;
}

/* The name of a subprogram or inlined subroutine, through its abstract origin. */
static const char *die_name(Dwarf_Die *d, const char **linkage) {
    Dwarf_Attribute a;
    *linkage = NULL;
    if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a) || dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a))
        *linkage = dwarf_formstring(&a);
    return dwarf_attr_integrate(d, DW_AT_name, &a) ? dwarf_formstring(&a) : NULL;
}

/* The file of a DW_AT_call_file index, or NULL. */
static const char *call_file(Dwarf_Die *cu, Dwarf_Die *d) {
    Dwarf_Attribute a;
    Dwarf_Word idx;
    Dwarf_Files *files;
    size_t nfiles;
    if (!dwarf_attr(d, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx)) return NULL;
    if (dwarf_getsrcfiles(cu, &files, &nfiles) || idx >= nfiles) return NULL;
    return dwarf_filesrc(files, idx, NULL, NULL);
}

static int64_t call_line(Dwarf_Die *d) {
    Dwarf_Attribute a;
    Dwarf_Word v;
    return dwarf_attr(d, DW_AT_call_line, &a) && !dwarf_formudata(&a, &v) ? (int64_t)v : 0;
}

static int cmp_range(const void *a, const void *b) {
    const dw_range_t *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Adds every address range of die to t. 0 or -1 (OOM). */
static int add_ranges(range_table_t *t, Dwarf_Die *die, Dwarf_Off cu) {
    Dwarf_Addr base, lo, hi;
    ptrdiff_t it = 0;
    while ((it = dwarf_ranges(die, it, &base, &lo, &hi)) > 0) {
        if (hi <= lo) continue;
        if (VEC_RESERVE(t->v, t->cap, t->n + 1)) return -1;
        t->v[t->n++] = (dw_range_t){.lo = lo, .hi = hi, .die = dwarf_dieoffset(die), .cu = cu};
    }
    return 0;
}

/* The functions (concrete subprograms) under die: a CU's children, and C++'s namespaces
 * and classes, whose member functions may sit inside them. depth bounds a hostile nesting. */
static int add_functions(range_table_t *t, Dwarf_Die *die, Dwarf_Off cu, int depth) {
    Dwarf_Die c;
    if (depth > 16 || dwarf_child(die, &c) != 0) return 0;
    do {
        int tag = dwarf_tag(&c);
        if (tag == DW_TAG_subprogram && add_ranges(t, &c, cu)) return -1;
        if ((tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type) &&
            add_functions(t, &c, cu, depth + 1))
            return -1;
    } while (dwarf_siblingof(&c, &c) == 0);
    return 0;
}

/* The CU and function tables, once per file. libdw finds a CU by .debug_aranges, which
 * Go's linker does not write (elfutils reads the CUs themselves only from 0.191 on), and
 * dwarf_getscopes walks a CU's whole DIE tree for every address (a Go runtime CU has
 * thousands of functions): with the function table, an address costs a binary search and
 * a walk down its one function's DIEs. */
static int build_ranges(elfobj_t *o) {
    o->ranges_built = 1;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(o->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        Dwarf_Die cu;
        if (dwarf_offdie(o->dw, off + hsize, &cu)) {
            Dwarf_Off cuoff = dwarf_dieoffset(&cu);
            if (add_ranges(&o->cus, &cu, cuoff) || add_functions(&o->fns, &cu, cuoff, 0)) {
                o->cus.n = o->fns.n = 0, o->ranges_built = 0; /* a partial table would answer wrongly */
                return -1;
            }
        }
        off = next;
    }
    /* qsort(NULL, 0) is undefined */
    if (o->cus.n) qsort(o->cus.v, o->cus.n, sizeof *o->cus.v, cmp_range);
    if (o->fns.n) qsort(o->fns.v, o->fns.n, sizeof *o->fns.v, cmp_range);
    return 0;
}

/* The range of t holding a, or NULL. Ranges of different DIEs do not overlap in real
 * files; with hostile ones the nearest range starting at or below a that holds it wins,
 * a scan back bounded. */
static const dw_range_t *find_range(const range_table_t *t, Dwarf_Addr a) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) { /* the first range starting past a */
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    for (size_t i = lo, k = 0; i-- > 0 && k < 64; k++)
        if (a < t->v[i].hi) return &t->v[i];
    return NULL;
}

/* The inlined subroutines holding a inside function fn, outermost first, after fn itself
 * in chain[0]: each step goes down into the one child (inlined subroutine or lexical
 * block) that holds a. Returns the chain's length (at most max). */
static int inline_chain(Dwarf_Die *fn, Dwarf_Addr a, Dwarf_Die *chain, int max) {
    int n = 0;
    chain[n++] = *fn;
    Dwarf_Die cur = *fn, c;
    for (int depth = 0; depth < 256 && dwarf_child(&cur, &c) == 0; depth++) {
        int down = 0;
        do {
            int tag = dwarf_tag(&c);
            if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) && dwarf_haspc(&c, a) > 0) {
                if (tag == DW_TAG_inlined_subroutine && n < max) chain[n++] = c;
                cur = c, down = 1;
                break;
            }
        } while (dwarf_siblingof(&c, &c) == 0);
        if (!down) break;
    }
    return n;
}

/* The file and line of a from the CU's line table. */
static const char *line_of(Dwarf_Die *cu, Dwarf_Addr a, int64_t *line) {
    Dwarf_Line *ln = dwarf_getsrc_die(cu, a);
    int lineno = 0;
    const char *file = ln ? dwarf_linesrc(ln, NULL, NULL) : NULL;
    if (ln) dwarf_lineno(ln, &lineno);
    *line = lineno;
    return file;
}

/* One frame named by a symbol (demangled for display). 1, or -1 out of memory. */
static int push_symbol(frames_t *out, const char *sym, const char *file, int64_t line) {
    char *shown = demangle(sym);
    int rc = frames_push(out, shown ? shown : sym, sym, file, line);
    free(shown);
    return rc ? -1 : 1;
}

static int resolve_dwarf(elfobj_t *o, Dwarf_Addr a, frames_t *out) {
    if (!o->ranges_built && build_ranges(o)) return -1;
    const dw_range_t *fr = find_range(&o->fns, a), *cr = fr ? fr : find_range(&o->cus, a);
    Dwarf_Die cu, fn;
    if (!cr || !dwarf_offdie(o->dw, cr->cu, &cu)) return 0;
    int64_t line;
    const char *file = line_of(&cu, a, &line);
    if (fr && dwarf_offdie(o->dw, fr->die, &fn)) {
        Dwarf_Die chain[MAX_INLINE];
        int n = inline_chain(&fn, a, chain, MAX_INLINE);
        for (int i = n; i-- > 0;) { /* innermost first */
            const char *linkage, *name = die_name(&chain[i], &linkage);
            char *shown = demangle(linkage); /* C++: the qualified name, not DW_AT_name's last part */
            int rc = frames_push(out, shown ? shown : name ? name : linkage ? linkage : "?", linkage, file, line);
            free(shown);
            if (rc) return -1;
            file = call_file(&cu, &chain[i]), line = call_line(&chain[i]);
        }
        return n;
    }
    /* A CU that covers the address with no function DIE (assembly with line info): the
     * symbol names it, the line table places it. */
    GElf_Off off;
    GElf_Sym sym;
    const char *s = file ? dwfl_module_addrinfo(o->mod, a + o->dwbias, &off, &sym, NULL, NULL, NULL) : NULL;
    return s ? push_symbol(out, s, file, line) : 0;
}

int elfobj_resolve(elfobj_t *o, uint64_t vaddr, frames_t *out) {
    Dwarf_Addr a = vaddr + o->bias;
    int n = o->have_dwarf ? resolve_dwarf(o, a - o->dwbias, out) : 0;
    if (n) return n;
    if (o->have_symtab) {
        GElf_Off off;
        GElf_Sym sym;
        const char *s = dwfl_module_addrinfo(o->mod, a, &off, &sym, NULL, NULL, NULL);
        if (s) return push_symbol(out, s, NULL, 0);
    }
    return o->pcln ? pclntab_resolve(o->pcln, vaddr, out) : 0;
}
