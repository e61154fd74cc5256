/* folded.c - see folded.h. */
#include "ingest/folded.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ptype.h"
#include "common/labels.h"

static uint32_t frame_location(symtab_t *t, const char *s, size_t n) {
    uint32_t name = symtab_string(t, s, n);
    if (name == SYM_NONE) return SYM_NONE;
    sym_function_t f = {name, name, 0, 0};
    sym_line_t line = {symtab_function(t, &f), 0};
    if (line.function == SYM_NONE) return SYM_NONE;
    return symtab_location(t, 0, 0, &line, 1);
}

static int parse_value(const char *s, size_t n, int64_t *v) {
    char tmp[32];
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(tmp, &end, 10);
    if (*end || errno || x < 0) return -1;
    *v = x;
    return 0;
}

int folded_decode(const char *text, size_t n, int lines, int64_t scale, batch_t *b, batch_profile_t *p, hr_err_t *err) {
    if (!utf8_valid(text, n)) return hr_fail(err, HR_EUNPROC, "folded input is not valid UTF-8");
    const char *s = text, *end = text + n;
    size_t lineno = 0;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *le = nl ? nl : end;
        lineno++;
        const char *line_end = le;
        if (line_end > s && line_end[-1] == '\r') line_end--;
        if (line_end == s) {
            s = le + 1;
            continue;
        }
        int64_t value = 1;
        const char *stack_end = line_end;
        if (!lines) {
            const char *sp = line_end;
            while (sp > s && sp[-1] != ' ') sp--;
            if (sp == s || parse_value(sp, (size_t)(line_end - sp), &value))
                return hr_fail(err, HR_EUNPROC, "folded line %zu: expected `frame;frame;... VALUE`", lineno);
            stack_end = sp - 1;
        }
        uint32_t stack = 0;
        for (const char *f = s; f < stack_end;) {
            const char *semi = memchr(f, ';', (size_t)(stack_end - f));
            const char *fe = semi ? semi : stack_end;
            if (fe > f) {
                uint32_t loc = frame_location(b->sym, f, (size_t)(fe - f));
                if (loc == SYM_NONE || (stack = symtab_stack(b->sym, stack, loc)) == SYM_NONE)
                    return hr_fail(err, HR_ENOMEM, "out of memory");
            }
            f = fe + 1;
        }
        int64_t scaled;
        if (__builtin_mul_overflow(value, scale, &scaled))
            return hr_fail(err, HR_EUNPROC, "folded line %zu: value %lld overflows a 64-bit total at this sample rate",
                           lineno, (long long)value);
        if (stack && value && batch_sample(p, stack, scaled)) return hr_fail(err, HR_ENOMEM, "out of memory");
        s = le + 1;
    }
    return 0;
}

/* Pyroscope's mapping of a text upload's name suffix to a profile type. cpu and wall
 * values are samples at sampleRate Hz, scaled to nanoseconds by the period. */
static int folded_type(const char *suffix, int64_t rate, char *out, size_t n, int64_t *scale, hr_err_t *err) {
    *scale = 1;
    const char *type = ptype_from_suffix(suffix);
    if (!type)
        return hr_fail(err, HR_EINVAL,
                       "unknown profile type `%s` (the name's last .suffix; use cpu, wall, "
                       "alloc_space, inuse_space, ... or upload pprof)",
                       suffix);
    int cpu = !strcmp(suffix, "cpu") || !strcmp(suffix, "itimer");
    if (cpu || !strcmp(suffix, "wall")) {
        if (rate > 0) *scale = 1000000000LL / rate;
        else type = cpu ? "process_cpu:samples:count:cpu:nanoseconds" : "wall:samples:count:wall:nanoseconds";
    }
    snprintf(out, n, "%s", type);
    return 0;
}

static int ingest_text(const ingest_request_t *r, const ingest_limits_t *lim, int lines, batch_t *b, ingest_series_t *s,
                       hr_err_t *err) {
    if (ingest_series_parse(r, s, err)) return -1;
    if (r->labels)
        return hr_fail(err, HR_EINVAL, "a folded upload is named by `name` (app.type{k=v}), not a label set");
    char *dot = strrchr(s->app, '.');
    const char *suffix = dot ? dot + 1 : "cpu";
    if (dot) *dot = 0;
    char type[256];
    int64_t scale;
    if (folded_type(suffix, r->sample_rate, type, sizeof type, &scale, err)) return -1;
    if (!s->app[0]) return hr_fail(err, HR_EINVAL, "empty application name");
    if (ingest_series_finish(r, s, lim, err)) return -1;
    int64_t t = r->has_from ? r->from_ns : r->received_ns;
    int64_t d = r->has_from && r->has_until ? r->until_ns - r->from_ns : 0;
    batch_profile_t *p = batch_profile(b, type, &s->labels, t, d);
    if (!p) return hr_fail(err, HR_ENOMEM, "out of memory");
    return folded_decode((const char *)r->body, r->body_len, lines, scale, b, p, err);
}

int folded_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    ingest_series_t s;
    int rc = ingest_text(r, lim, 0, b, &s, err);
    labels_destroy(&s.labels);
    return rc;
}

int lines_ingest(const ingest_request_t *r, const ingest_limits_t *lim, batch_t *b, hr_err_t *err) {
    ingest_series_t s;
    int rc = ingest_text(r, lim, 1, b, &s, err);
    labels_destroy(&s.labels);
    return rc;
}

ingest_sniff_t folded_sniff(const ingest_peek_t *pk) { return pk->textual ? SNIFF_MAYBE : SNIFF_NO; }
