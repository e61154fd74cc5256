/* scrape_sd.h - where a scrape job's targets come from: a static list, files (file_sd),
 * an HTTP endpoint (http_sd), each target relabeled (relabel.h) as Prometheus does.
 *
 * A job of the scrape config's "jobs" array:
 *   {"job": "api", "scheme": "http", "profiles": ["cpu", "heap"], "interval": "30s",
 *    "tenant": "team-a",
 *    "static_configs": [{"targets": ["10.0.0.5:6060"], "labels": {"env": "prod"}}],
 *    "file_sd_configs": [{"files": ["/etc/hearth/sd-*.json"], "refresh_interval": "30s"}],
 *    "http_sd_configs": [{"url": "http://sd.internal/targets", "refresh_interval": "60s"}],
 *    "relabel_configs": [...]}
 * Files and HTTP answers hold Prometheus's target groups, JSON:
 *   [{"targets": ["host:port", ...], "labels": {"name": "value", ...}}, ...]
 * Before relabeling a target's labels are its group's, __address__, __scheme__, job, and
 * __meta_filepath (file_sd) or __meta_url (http_sd). After it, __address__ and
 * __scheme__ make the URL, labels starting with `__` go, and instance defaults to the
 * address. A source that cannot be read keeps its last good targets (logged), as
 * Prometheus does. */
#ifndef HEARTH_SCRAPE_SD_H
#define HEARTH_SCRAPE_SD_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/err.h"

typedef struct sd_job sd_job_t;

/* Parses one "jobs" entry; NULL with err naming the job and field at fault (unknown
 * fields are refused). */
sd_job_t *sd_job_new(json_t *spec, hr_err_t *err);
void sd_job_free(sd_job_t *j);

const char *sd_job_name(const sd_job_t *j);
/* How often its files and HTTP endpoints are read again; 0 when it has none (its
 * targets never change). */
int64_t sd_job_refresh_ns(const sd_job_t *j);

/* The job's targets now, as a JSON array of scrape targets in the config's "targets"
 * shape ({"job", "url", "labels", and the job's "profiles", "interval", "tenant"}),
 * sorted and without repeats; NULL when out of memory. Reads the files and endpoints
 * (an HTTP read gives up when *cancel is set). */
json_t *sd_job_discover(sd_job_t *j, atomic_int *cancel);

#endif
