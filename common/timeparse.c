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

int duration_parse(const char *s, int64_t *out) {
    char *end;
    if (!*s || !isdigit((unsigned char)*s)) return -1;
    double v = strtod(s, &end);
    int64_t unit;
    if (!strcmp(end, "ns")) unit = 1;
    else if (!strcmp(end, "us")) unit = 1000;
    else if (!strcmp(end, "ms")) unit = 1000000;
    else if (!strcmp(end, "s") || !*end) unit = NS;
    else if (!strcmp(end, "m")) unit = 60 * NS;
    else if (!strcmp(end, "h")) unit = 3600 * NS;
    else if (!strcmp(end, "d")) unit = 86400 * NS;
    else if (!strcmp(end, "w")) unit = 7 * 86400 * NS;
    else if (!strcmp(end, "y")) unit = 365 * 86400 * NS;
    else return -1;
    if (v < 0 || v * (double)unit > 9.2e18) return -1;
    *out = (int64_t)(v * (double)unit);
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
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &consumed) != 6)
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
