/* elf.h - one ELF file opened for symbolization: addresses to frames.
 *
 * An elfobj_t is an explicit libdwfl session (Dwfl) over one file, reported offline
 * as elfutils' own tools do, plus what normalization needs from its program headers.
 * A lookup tries, in order: DWARF (lines and inlined frames, via the scopes of the
 * address in its compilation unit), the ELF symbol table (a name, no line), and the
 * Go .gopclntab (pclntab.h). It is not thread-safe (neither is a Dwfl): the owner
 * serializes calls (symbolizer.c holds its lock). */
#ifndef HEARTH_ELF_H
#define HEARTH_ELF_H

#include <stdint.h>

#include "common/err.h"
#include "symbolize/frames.h"

typedef struct elfobj elfobj_t;

/* Opens path (read-only). A file that is not ELF, or whose ELF libelf refuses, is an
 * HR_EUNPROC; out of memory HR_ENOMEM. NULL with err either way. */
elfobj_t *elfobj_open(const char *path, hr_err_t *err);
/* The same over an open descriptor, which the object takes over (closed by
 * elfobj_close, or at once on failure). For the fuzzer, which has bytes, not a file. */
elfobj_t *elfobj_open_fd(int fd, hr_err_t *err);
void elfobj_close(elfobj_t *o);

/* The file's virtual address of a sampled address, as pprof normalizes it: an
 * executable (ET_EXEC) is loaded at its link addresses, so the address is already one;
 * otherwise the address's file offset (addr - start + offset of its mapping) is
 * placed by the PT_LOAD segment holding it. A mapping with no start (0, as some
 * agents send for a main binary) leaves the address as it is. */
uint64_t elfobj_normalize(const elfobj_t *o, uint64_t addr, uint64_t start, uint64_t limit, uint64_t offset);

/* Appends the frames of vaddr (innermost first) to out. Returns how many it appended
 * (0: nothing in the file covers vaddr), or -1 out of memory. */
int elfobj_resolve(elfobj_t *o, uint64_t vaddr, frames_t *out);

#endif
