/* timeparse.c - see timeparse.h. */
#include "common/timeparse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS 1000000000LL

int64_t time_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

int64_t time_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

/* Units as Go's time.ParseDuration and Prometheus name them, plus d, w and y. */
static const struct {
    const char *name;
    int64_t ns;
} UNITS[] = {{"ns", 1},      {"us", 1000},     {"\xc2\xb5s", 1000}, {"ms", 1000000},       {"s", NS},
             {"m", 60 * NS}, {"h", 3600 * NS}, {"d", 86400 * NS},   {"w", 7 * 86400 * NS}, {"y", 365 * 86400 * NS}};

/* Reads a unit at *p (the longest that matches), advancing past it; 0 if none. */
static int64_t read_unit(const char **p) {
    int64_t best = 0;
    size_t best_len = 0;
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++) {
        size_t n = strlen(UNITS[i].name);
        if (n > best_len && !strncmp(*p, UNITS[i].name, n)) best = UNITS[i].ns, best_len = n;
    }
    *p += best_len;
    return best;
}

int duration_parse(const char *s, int64_t *out) {
    if (!*s) return -1;
    double total = 0;
    while (*s) {
        if (!isdigit((unsigned char)*s) && *s != '.') return -1;
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 0) return -1;
        s = end;
        int64_t unit = read_unit(&s);
        if (!unit) return -1; /* a bare number: seconds? days? the caller must say */
        total += v * (double)unit;
        if (total > 9.2e18) return -1;
    }
    *out = (int64_t)total;
    return 0;
}

static int parse_digits(const char *s, int64_t *out) {
    size_t n = strlen(s);
    if (n == 0 || n > 19) return -1;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return -1;
    int64_t v = strtoll(s, NULL, 10);
    if (n == 8) { /* YYYYMMDD */
        struct tm tm = {0};
        tm.tm_year = (int)(v / 10000) - 1900;
        tm.tm_mon = (int)(v / 100 % 100) - 1;
        tm.tm_mday = (int)(v % 100);
        *out = (int64_t)timegm(&tm) * NS;
    } else if (n == 13) *out = v * 1000000;
    else if (n == 16) *out = v * 1000;
    else if (n == 19) *out = v;
    else *out = v * NS;
    return 0;
}

static int parse_rfc3339(const char *s, int64_t *out) {
    struct tm tm = {0};
    int consumed = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
               &tm.tm_sec, &consumed) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = s + consumed;
    int64_t frac = 0;
    if (*p == '.') {
        int64_t scale = 100000000;
        for (p++; isdigit((unsigned char)*p); p++, scale /= 10) frac += (*p - '0') * scale;
    }
    int64_t offset = 0;
    if (*p == 'Z' || *p == 'z') p++;
    else if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2) return -1;
        offset = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else return -1;
    if (*p) return -1;
    *out = ((int64_t)timegm(&tm) - offset) * NS + frac;
    return 0;
}

int time_parse(const char *s, int64_t now, int64_t *out) {
    if (!s || !*s) return -1;
    if (!strncmp(s, "now", 3)) {
        if (!s[3]) {
            *out = now;
            return 0;
        }
        if (s[3] != '-' && s[3] != '+') return -1;
        int64_t d;
        if (duration_parse(s + 4, &d)) return -1;
        *out = s[3] == '-' ? now - d : now + d;
        return 0;
    }
    if (parse_digits(s, out) == 0) return 0;
    return parse_rfc3339(s, out);
}
