/* buildid.h - which build IDs an ELF file proves it has.
 *
 * A debug file is stored under the build ID its URL names, and every tenant's queries
 * then take its names for addresses in that binary. So a file is trusted only as far
 * as it proves: the ID must be one the file itself carries. Agents name a binary in
 * one of three ways, and each is checked against the file's own bytes:
 *   - the GNU build-id note (NT_GNU_BUILD_ID in a SHT_NOTE section), hex;
 *   - the Go build ID note (owner "Go", type 4, `.note.go.buildid`), its string hex-encoded;
 *   - Parca's ID for a binary with neither, the SHA-1 of its `.text` section, hex.
 * Comparison ignores the hex digits' case. */
#ifndef HEARTH_BUILDID_H
#define HEARTH_BUILDID_H

#include <stddef.h>

#include "common/err.h"

/* Checks that the ELF file at path proves build ID id (hex). 0 when it does; -1 with
 * err HR_EINVAL when it is not ELF or carries other IDs (the message names them),
 * HR_EIO when it cannot be read, HR_ENOMEM. */
int buildid_check_file(const char *path, const char *id, hr_err_t *err);

#endif
