/* relabel.c - see relabel.h. */
#include "server/relabel.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/regex.h"

typedef enum {
    A_REPLACE,
    A_KEEP,
    A_DROP,
    A_KEEPEQUAL,
    A_DROPEQUAL,
    A_HASHMOD,
    A_LABELMAP,
    A_LABELDROP,
    A_LABELKEEP,
    A_LOWERCASE,
    A_UPPERCASE,
} action_t;

static const struct {
    const char *name;
    action_t action;
    int needs_target; /* target_label is required */
} ACTIONS[] = {
    {"replace", A_REPLACE, 1},     {"keep", A_KEEP, 0},           {"drop", A_DROP, 0},
    {"keepequal", A_KEEPEQUAL, 1}, {"dropequal", A_DROPEQUAL, 1}, {"hashmod", A_HASHMOD, 1},
    {"labelmap", A_LABELMAP, 0},   {"labeldrop", A_LABELDROP, 0}, {"labelkeep", A_LABELKEEP, 0},
    {"lowercase", A_LOWERCASE, 1}, {"uppercase", A_UPPERCASE, 1},
};

struct relabel_rule {
    action_t action;
    char **sources;
    size_t nsources;
    char separator[64], target[256], replacement[512];
    uint64_t modulus;
    hr_regex_t *re;
};

static const char *const FIELDS[] = {"source_labels", "separator", "regex", "target_label",
                                     "replacement",   "modulus",   "action"};

static void rule_free(relabel_rule_t *r) {
    for (size_t i = 0; i < r->nsources; i++) free(r->sources[i]);
    free(r->sources);
    hr_regex_free(r->re);
}

void relabel_free(relabel_t *r) {
    for (size_t i = 0; i < r->n; i++) rule_free(&r->rules[i]);
    free(r->rules);
    r->rules = NULL;
    r->n = 0;
}

/* A string field into out[cap] (def when absent); -1 when it is not a string or too long. */
static int str_field(json_t *o, const char *name, const char *def, char *out, size_t cap) {
    json_t *v = json_object_get(o, name);
    if (v && !json_is_string(v)) return -1;
    const char *s = v ? json_string_value(v) : def;
    return snprintf(out, cap, "%s", s) < (int)cap ? 0 : -1;
}

static int parse_rule(json_t *o, size_t at, relabel_rule_t *r, hr_err_t *err) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        size_t i = 0;
        while (i < sizeof FIELDS / sizeof *FIELDS && strcmp(FIELDS[i], k)) i++;
        if (i == sizeof FIELDS / sizeof *FIELDS)
            return hr_fail(err, HR_EINVAL, "relabel rule %zu: unknown field `%s`", at, k);
    }
    char action[32], regex[1024];
    if (str_field(o, "action", "replace", action, sizeof action) ||
        str_field(o, "separator", ";", r->separator, sizeof r->separator) ||
        str_field(o, "target_label", "", r->target, sizeof r->target) ||
        str_field(o, "replacement", "$1", r->replacement, sizeof r->replacement) ||
        str_field(o, "regex", "(.*)", regex, sizeof regex))
        return hr_fail(err, HR_EINVAL,
                       "relabel rule %zu: action, separator, regex, target_label and replacement are "
                       "strings (of reasonable length)",
                       at);
    size_t a = 0;
    while (a < sizeof ACTIONS / sizeof *ACTIONS && strcmp(ACTIONS[a].name, action)) a++;
    if (a == sizeof ACTIONS / sizeof *ACTIONS)
        return hr_fail(err, HR_EINVAL, "relabel rule %zu: unknown action `%s`", at, action);
    r->action = ACTIONS[a].action;
    if (ACTIONS[a].needs_target && !r->target[0])
        return hr_fail(err, HR_EINVAL, "relabel rule %zu: action %s needs target_label", at, action);
    json_t *m = json_object_get(o, "modulus");
    if (r->action == A_HASHMOD && (!json_is_integer(m) || json_integer_value(m) < 1))
        return hr_fail(err, HR_EINVAL, "relabel rule %zu: hashmod needs a positive integer modulus", at);
    r->modulus = m ? (uint64_t)json_integer_value(m) : 0;
    json_t *src = json_object_get(o, "source_labels");
    if (src && !json_is_array(src))
        return hr_fail(err, HR_EINVAL, "relabel rule %zu: source_labels is an array of names", at);
    r->sources = calloc(json_array_size(src) + 1, sizeof *r->sources);
    if (!r->sources) return hr_fail(err, HR_ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(src); i++) {
        const char *n = json_string_value(json_array_get(src, i));
        if (!n || !(r->sources[r->nsources] = strdup(n)))
            return hr_fail(err, HR_EINVAL, "relabel rule %zu: source_labels is an array of names", at);
        r->nsources++;
    }
    hr_err_t re_err = {0};
    if (!(r->re = hr_regex_compile_groups(regex, &re_err)))
        return hr_fail(err, HR_EINVAL, "relabel rule %zu: regex: %s", at, re_err.msg);
    return 0;
}

int relabel_parse(json_t *rules, relabel_t *r, hr_err_t *err) {
    r->rules = NULL;
    r->n = 0;
    if (!rules) return 0;
    if (!json_is_array(rules)) return hr_fail(err, HR_EINVAL, "relabel_configs must be an array of rules");
    if (!(r->rules = calloc(json_array_size(rules) + 1, sizeof *r->rules)))
        return hr_fail(err, HR_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < json_array_size(rules) && rc == 0; i++) {
        json_t *o = json_array_get(rules, i);
        r->n++; /* counted first: relabel_free frees what a failed parse left */
        if (!json_is_object(o)) rc = hr_fail(err, HR_EINVAL, "relabel rule %zu is not an object", i);
        else rc = parse_rule(o, i, &r->rules[i], err);
    }
    if (rc) relabel_free(r);
    return rc;
}

/* The source labels' values joined by the separator (a missing label is ""). */
static void source_value(const relabel_rule_t *r, const labels_t *l, buf_t *out) {
    out->len = 0;
    for (size_t i = 0; i < r->nsources; i++) {
        const char *v = labels_get(l, r->sources[i]);
        if (i) buf_append(out, r->separator, strlen(r->separator));
        if (v) buf_append(out, v, strlen(v));
    }
    buf_putc(out, 0);
    out->len--;
}

/* Sets name to value, or removes it for an empty value; a name that is not a valid
 * label name is left alone, as Prometheus does. */
static int set_label(labels_t *l, const char *name, const char *value) {
    if (!label_name_valid(name)) return 0;
    if (!*value) return labels_del(l, name), 0;
    return labels_set(l, name, value);
}

static int hashmod(const relabel_rule_t *r, labels_t *l, const buf_t *v) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!EVP_Digest(v->data, v->len, md, &n, EVP_md5(), NULL) || n != 16) return -1;
    uint64_t h = 0;
    for (int i = 8; i < 16; i++) h = h << 8 | md[i];
    char s[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)(h % r->modulus));
    return labels_set(l, r->target, s);
}

/* labelmap, labeldrop, labelkeep: over every label's name. */
static int by_name(const relabel_rule_t *r, labels_t *l) {
    labels_t out;
    labels_init(&out);
    int rc = labels_copy(&out, l);
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        const char *name = l->v[i].name;
        int match = hr_regex_match(r->re, name, strlen(name));
        if ((r->action == A_LABELDROP && match) || (r->action == A_LABELKEEP && !match)) labels_del(&out, name);
        if (r->action == A_LABELMAP && match) {
            char *to = hr_regex_expand(r->re, name, strlen(name), r->replacement);
            rc = to ? set_label(&out, to, l->v[i].value) : -1;
            free(to);
        }
    }
    if (rc == 0) {
        labels_destroy(l);
        *l = out;
    } else {
        labels_destroy(&out);
    }
    return rc;
}

static int case_of(labels_t *l, const char *target, const buf_t *v, int upper) {
    char *s = strndup((const char *)v->data, v->len);
    if (!s) return -1;
    for (char *p = s; *p; p++) *p = (char)(upper ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
    int rc = set_label(l, target, s);
    free(s);
    return rc;
}

static int replace(const relabel_rule_t *r, labels_t *l, const buf_t *v) {
    const char *val = (const char *)v->data;
    char *target = hr_regex_expand(r->re, val, v->len, r->target);
    if (!target) return 0; /* no match: nothing to do (or out of memory: left as it is) */
    char *res = hr_regex_expand(r->re, val, v->len, r->replacement);
    int rc = res ? set_label(l, target, res) : -1;
    free(target);
    free(res);
    return rc;
}

/* One rule: 1 keep, 0 dropped, -1 out of memory. */
static int apply_rule(const relabel_rule_t *r, labels_t *l, buf_t *v) {
    source_value(r, l, v);
    if (v->oom) return -1;
    const char *val = (const char *)v->data;
    const char *target = labels_get(l, r->target);
    switch (r->action) {
    case A_KEEP: return hr_regex_match(r->re, val, v->len);
    case A_DROP: return !hr_regex_match(r->re, val, v->len);
    case A_KEEPEQUAL: return !strcmp(val, target ? target : "");
    case A_DROPEQUAL: return strcmp(val, target ? target : "") != 0;
    case A_HASHMOD: return hashmod(r, l, v) ? -1 : 1;
    case A_LABELMAP:
    case A_LABELDROP:
    case A_LABELKEEP: return by_name(r, l) ? -1 : 1;
    case A_LOWERCASE:
    case A_UPPERCASE: return case_of(l, r->target, v, r->action == A_UPPERCASE) ? -1 : 1;
    case A_REPLACE: return replace(r, l, v) ? -1 : 1;
    }
    return 1;
}

int relabel_apply(const relabel_t *r, labels_t *l) {
    buf_t v;
    buf_init(&v);
    int rc = 1;
    for (size_t i = 0; i < r->n && rc == 1; i++) rc = apply_rule(&r->rules[i], l, &v);
    buf_free(&v);
    return rc;
}
