/* pclntab.h - function names and file:line from a Go binary's .gopclntab.
 *
 * Go links a table of every function (entry pc, name, pc->file and pc->line
 * tables) into each binary for its own tracebacks, and `go build -ldflags=-s -w` or
 * strip leave it there when DWARF and the symbol table are gone, so it is the last
 * source of names for a stripped Go service. Layouts read: Go 1.16-1.17 (magic
 * 0xfffffffa), 1.18-1.19 (0xfffffff0) and 1.20 and later (0xfffffff1).
 *
 * Inlined frames are not reported: the inline tree is a funcdata blob that lives in
 * go:func.* (in .rodata, outside the table), which stripped debug files often drop;
 * an address answers with the out-of-line function at the address's own line, as
 * the table records it (Go's table gives the inlined body's file:line). */
#ifndef HEARTH_PCLNTAB_H
#define HEARTH_PCLNTAB_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "symbolize/frames.h"

typedef struct pclntab pclntab_t;

/* Reads the table's header over data (the section's bytes; borrowed, must outlive
 * the table). Every offset is checked against n before use: a truncated or hostile
 * table is an HR_EUNPROC, never a read out of bounds. NULL with err on failure. */
pclntab_t *pclntab_open(const uint8_t *data, size_t n, hr_err_t *err);
void pclntab_free(pclntab_t *t);

/* Appends the frame of pc (a virtual address in the binary) to out: 1 when a
 * function covers pc, 0 when none does, -1 out of memory. */
int pclntab_resolve(const pclntab_t *t, uint64_t pc, frames_t *out);

#endif
