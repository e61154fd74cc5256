/* appname.c - see appname.h. */
#include "ingest/appname.h"

#include <ctype.h>
#include <string.h>

static int app_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '/'; }

/* Copies [b, e) trimmed into out; returns its length or -1 if it does not fit. */
static long trimmed(const char *b, const char *e, char *out, size_t n) {
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if ((size_t)(e - b) >= n) return -1;
    memcpy(out, b, (size_t)(e - b));
    out[e - b] = 0;
    return e - b;
}

int appname_parse(const char *s, char *app, size_t applen, labels_t *out, hr_err_t *err) {
    if (!s || !*s) return hr_fail(err, HR_EINVAL, "missing application name (the `name` parameter)");
    if (!utf8_valid(s, strlen(s))) return hr_fail(err, HR_EINVAL, "name is not valid UTF-8");
    const char *brace = strchr(s, '{');
    const char *end = brace ? brace : s + strlen(s);
    if (trimmed(s, end, app, applen) <= 0)
        return hr_fail(err, HR_EINVAL, "empty or too long application name in `%s`", s);
    for (const char *p = app; *p; p++)
        if (!app_char(*p))
            return hr_fail(err, HR_EINVAL,
                           "application name `%s` has an invalid character '%c' "
                           "(allowed: letters, digits, _ . - /)",
                           app, *p);
    if (!brace) return 0;
    const char *close = strchr(brace, '}');
    if (!close || close[1]) return hr_fail(err, HR_EINVAL, "name `%s`: labels must be one {...} group at the end", s);
    const char *p = brace + 1;
    while (p < close) {
        const char *comma = memchr(p, ',', (size_t)(close - p));
        const char *item_end = comma ? comma : close;
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        char k[256], v[4097]; /* --max-label-value-bytes (default 2048) decides later */
        long kl = 0;
        if (!eq) {
            if (trimmed(p, item_end, k, sizeof k) == 0 && !comma) break; /* `app{}` */
            return hr_fail(err, HR_EINVAL, "name `%s`: label without '=' ", s);
        }
        kl = trimmed(p, eq, k, sizeof k);
        if (kl <= 0 || !label_name_valid(k))
            return hr_fail(err, HR_EINVAL, "name `%s`: invalid label name `%.*s`", s, (int)(eq - p), p);
        if (trimmed(eq + 1, item_end, v, sizeof v) < 0) return hr_fail(err, HR_EINVAL, "label `%s` value too long", k);
        if (strpbrk(v, "{}=")) return hr_fail(err, HR_EINVAL, "label `%s` value contains { } or =", k);
        if (labels_set(out, k, v)) return hr_fail(err, HR_ENOMEM, "out of memory");
        p = item_end + 1;
    }
    return 0;
}
