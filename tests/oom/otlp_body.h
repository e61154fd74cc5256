/* otlp_body.h - a real pprof converted to an OTLP profiles request, for the oom paths.
 *
 * The shared test data holds pprof files only; the OTLP ingest path runs on the same
 * profile, converted here as an exporter would: one Profile per sample type, the
 * sample labels as attributes, every mapping given build_id. */
#ifndef HEARTH_OOM_OTLP_BODY_H
#define HEARTH_OOM_OTLP_BODY_H

#include <stddef.h>
#include <stdint.h>

/* The ExportProfilesServiceRequest (protobuf) of the gzipped pprof gz (n bytes), under
 * service.name service, every profile at time_ns; malloc'd, *len bytes. NULL when gz
 * is not a pprof. */
unsigned char *otlp_body_of_pprof(const unsigned char *gz, size_t n, const char *service, const char *build_id,
                                  int64_t time_ns, size_t *len);

#endif
