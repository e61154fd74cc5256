/* scrape.h - pull mode: fetch profiles from targets on a schedule, as Parca and
 * Conprof do.
 *
 * The scrape config (--scrape-config FILE) is JSON:
 *   {"interval": "15s", "cpu_seconds": 10,
 *    "targets": [{"job": "api", "url": "http://10.0.0.5:6060", "labels": {"env": "prod"},
 *                 "profiles": ["cpu", "heap", "allocs", "mutex", "block", "goroutine"],
 *                 "interval": "30s"}]}
 * Profiles name Go's net/http/pprof endpoints: cpu is /debug/pprof/profile?seconds=N;
 * allocs, mutex and block are fetched as deltas over N seconds (?seconds=N), so each
 * scrape holds what happened in its window; heap and goroutine are snapshots. A
 * profile may also be {"name": "x", "path": "/custom/path"}; one named like a
 * built-in profile is stored as that profile.
 *
 * What is stored, and under which type (as Pyroscope names them):
 *   cpu        process_cpu:*
 *   heap       memory:inuse_objects, memory:inuse_space (its alloc_* count since the
 *              process started: they would re-count its whole life every scrape)
 *   allocs     memory:alloc_objects, memory:alloc_space (the delta's inuse_* are
 *              differences, negative where memory was freed)
 *   mutex      mutex:contentions:count:..., mutex:delay:nanoseconds:...
 *   block      block:contentions:count:..., block:delay:nanoseconds:... (the same
 *              sample types as mutex: the endpoint tells them apart)
 *   goroutine  goroutine:*
 *
 * Schedule: every (target, profile) has its own thread and schedule. CPU is
 * profiled back to back, one cpu_seconds profile after another, so CPU time is
 * covered without gaps; the other profiles start every interval. A profile that
 * takes longer than its period (cpu_seconds over the interval: a warning is logged
 * at start) is fetched again as soon as it returns. Stopping cancels fetches in
 * flight.
 *
 * Scraped profiles are labelled service_name=job, job, instance (host:port) and
 * the target's labels, and are stored through the same write path as uploads
 * (ingest/pipeline.h): each is a pprof request carrying those labels.
 *
 * Besides "targets", a "jobs" array discovers targets as Prometheus does: static
 * lists, files and HTTP endpoints of target groups, relabeled (scrape_sd.h). A
 * discovery thread reads them again every refresh interval and starts and stops
 * targets as they come and go; a target whose config is unchanged keeps running.
 *
 * In a cluster every node may load the same config: the targets are then divided among
 * the live nodes that scrape (the catalog's heartbeats, scraper_set_shard) by
 * rendezvous hashing of (job, url) over node names, so each target is scraped by one
 * node, and a node that joins or dies moves only its own share. A job checks whether
 * its target is its node's before each scrape, so a target taken over is scraped from
 * its next scheduled time on. */
#ifndef HEARTH_SCRAPE_H
#define HEARTH_SCRAPE_H

#include "common/buf.h"
#include "common/err.h"

struct app;
typedef struct scraper scraper_t;

/* The nodes targets are divided among: self (this node's name) and the live nodes
 * that scrape (names; self among them or not). */
typedef struct {
    const char *self;
    char *const *nodes;
    size_t n;
} scrape_shard_t;

/* Parses the config and starts scraping, every target (shard NULL) or this node's share
 * of them; NULL with err on a bad config. */
scraper_t *scraper_start(const char *config_path, struct app *app, const scrape_shard_t *shard, hr_err_t *err);
/* The live scraping nodes now (copied): each target goes to one of them and self. */
void scraper_set_shard(scraper_t *s, char *const *nodes, size_t n);
/* Stops every scrape thread (cancelling fetches in flight: about a second) and frees. */
void scraper_stop(scraper_t *s);
/* {"targets":[{"job","url","profile","labels","health","lastScrape","lastError",
 * "lastDurationSeconds","scrapes","failures"[,"scrapedBy"]}]}; in a cluster scrapedBy
 * names the node whose share the target is. */
void scraper_targets_json(scraper_t *s, buf_t *out);
/* Prometheus lines: hearth_scrape_up, _duration_seconds, _total, _failures_total. */
void scraper_metrics(scraper_t *s, buf_t *out);

#endif
