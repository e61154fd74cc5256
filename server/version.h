/* version.h - the one place Hearth's version is written (--version, logs, /metrics). */
#ifndef HEARTH_VERSION_H
#define HEARTH_VERSION_H

#define HEARTH_VERSION "0.1.0"

#endif
