/* jsonw.h - writing JSON text straight into a buf_t.
 *
 * Big responses (flame graphs with thousands of nodes, long time series) are
 * written directly rather than built as a jansson tree first; small ones use
 * jansson. This is only the string escaping both need to agree on. */
#ifndef HEARTH_JSONW_H
#define HEARTH_JSONW_H

#include "common/buf.h"

/* Appends s as a quoted, escaped JSON string. */
void jsonw_str(buf_t *b, const char *s);
/* The same for s[0..n) (a NUL inside is written as \u0000). */
void jsonw_strn(buf_t *b, const char *s, size_t n);

#endif
