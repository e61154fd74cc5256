/* rules.h - recording rules: metrics from profiles, sent to Prometheus.
 *
 * A rule names a metric, a selection (matchers naming __profile_type__ and any labels),
 * labels to group by, constant labels to add, and optionally a function: the metric
 * is then the total of the samples whose stack holds that function (pprof's `cum`).
 * Every --recording-rules-interval I, each rule is evaluated for the interval [t, t+I)
 * that ended one interval ago (so uploads of it have arrived): per group, the sum of
 * the selection's values in it, exactly what /api/v1/timeseries answers with step I
 * for the same query, group_by and focus, at timestamp t. The samples go to
 * --remote-write-url (remote_write.h). A profile arriving after its interval was
 * evaluated is not counted again (as a Prometheus rule does not re-evaluate).
 *
 * Rules come from --recording-rules FILE (provisioned: read-only through the API) and
 * from settings.v1.RecordingRulesService (per tenant, a tenant document, so every node
 * of a cluster sees them; each node evaluates them, so in a cluster one node should
 * have --remote-write-url). */
#ifndef HEARTH_RULES_H
#define HEARTH_RULES_H

#include "common/err.h"
#include "server/app.h"

/* Loads the provisioned rules of path ("" for none) into a->rules, checking each
 * (HR_EINVAL naming the rule and what is wrong). 0 or -1. */
int rules_load(app_t *a, const char *path, hr_err_t *err);
/* Starts the evaluator (when --remote-write-url is set). 0 or -1. */
int rules_start(app_t *a, hr_err_t *err);
/* Stops the evaluator and the sender, frees the rules. */
void rules_stop(app_t *a);

/* A rule is the JSON object {"id", "metric_name", "matchers": [...], "group_by":
 * [...], "external_labels": {...}, "function_name", "generation"} (provisioned ones
 * also "tenant" and "provisioned": true). */
#include <jansson.h>
/* Checks r as a rule; -1 with err (HR_EINVAL) saying what is wrong. */
int rule_check(const json_t *r, hr_err_t *err);
/* The rule's selector as a query, TYPE{...}, into q and its profile type into type.
 * 0 or -1 with err. */
int rule_query(const json_t *r, char *type, size_t tcap, char *q, size_t qcap, hr_err_t *err);
#define RULES_DOC_MAX (1 << 20) /* bytes of a tenant's rule document */
/* The provisioned rules (an array; borrowed). */
const json_t *rules_provisioned(const app_t *a);
/* Serializes API writes of rule documents on this node. */
void rules_lock(app_t *a);
void rules_unlock(app_t *a);

/* Appends the rules' and the sender's metrics to a /metrics answer. */
#include "common/buf.h"
void rules_metrics(app_t *a, buf_t *o);

#define RULES_PREFIX "/settings.v1.RecordingRulesService/"
/* GetRecordingRule, ListRecordingRules, UpsertRecordingRule, DeleteRecordingRule. */
void api_rules(app_t *a, http_req_t *req, http_resp_t *resp);

#endif
