/* relabel.h - Prometheus's relabeling of discovered targets (relabel_configs).
 *
 * A scrape job's discovered targets carry labels: __address__ (host:port), __scheme__,
 * the job, the discovery source's own (file_sd's and http_sd's "labels") and __meta_*
 * ones. Rules, in order, rewrite them, and decide which targets are scraped, with
 * Prometheus's semantics and the same JSON field names:
 *   {"source_labels": ["__address__"], "separator": ";", "regex": "(.*)",
 *    "target_label": "instance", "replacement": "$1", "modulus": 4, "action": "replace"}
 * Actions: replace (the default), keep, drop, keepequal, dropequal, hashmod, labelmap,
 * labeldrop, labelkeep, lowercase, uppercase. The regex matches a whole value (RE2,
 * as Go's). hashmod is md5 of the joined source values, its last 8 bytes big-endian,
 * modulo `modulus`: the same target lands in the same shard as under Prometheus. */
#ifndef HEARTH_RELABEL_H
#define HEARTH_RELABEL_H

#include <jansson.h>

#include "common/err.h"
#include "common/labels.h"

typedef struct relabel_rule relabel_rule_t;

typedef struct {
    relabel_rule_t *rules;
    size_t n;
} relabel_t;

/* Parses a JSON array of rules (NULL: none) into r. 0, or -1 with err naming the rule
 * and field at fault (an unknown action or field, a bad regex, a missing target_label);
 * r then holds nothing to free. */
int relabel_parse(json_t *rules, relabel_t *r, hr_err_t *err);
void relabel_free(relabel_t *r);

/* Applies r to l in place: 1 to keep the target, 0 when a rule dropped it, -1 when out
 * of memory. */
int relabel_apply(const relabel_t *r, labels_t *l);

#endif
