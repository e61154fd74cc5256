/* appname.h - Pyroscope's application name syntax: `app.name{k=v,k2=v2}`.
 *
 * The part before `{` is the application name (characters [A-Za-z0-9_.\-/]);
 * label names use [A-Za-z_][A-Za-z0-9_.]* (dots allowed: agents send
 * otel.scope.name); keys and values are trimmed of spaces; values may not contain
 * `{ } , =`. */
#ifndef HEARTH_APPNAME_H
#define HEARTH_APPNAME_H

#include <stddef.h>

#include "common/err.h"
#include "common/labels.h"

/* Parses s: writes the application name into app and adds its labels to out. */
int appname_parse(const char *s, char *app, size_t applen, labels_t *out, hr_err_t *err);

#endif
