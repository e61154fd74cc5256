/* log.c - see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static log_level_t threshold = LOG_INFO;
static int as_json;
static const char *names[] = {"debug", "info", "warn", "error"};

void log_set_level(log_level_t level) { threshold = level; }
void log_set_json(int json) { as_json = json; }

static void json_escaped(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Rewrites `k=v k2="quoted v"` pairs as JSON members. */
static void logfmt_to_json(FILE *f, const char *p) {
    while (*p) {
        while (*p == ' ') p++;
        const char *k = p;
        while (*p && *p != '=' && *p != ' ') p++;
        if (*p != '=' || p == k) {
            while (*p && *p != ' ') p++;
            continue;
        }
        size_t kl = (size_t)(p - k);
        p++;
        char val[1024];
        size_t vl = 0;
        if (*p == '"') {
            for (p++; *p && *p != '"' && vl < sizeof val - 1; p++) {
                if (*p == '\\' && p[1]) p++;
                val[vl++] = *p;
            }
            if (*p == '"') p++;
        } else {
            while (*p && *p != ' ' && vl < sizeof val - 1) val[vl++] = *p++;
        }
        fputc(',', f);
        json_escaped(f, k, kl);
        fputc(':', f);
        json_escaped(f, val, vl);
    }
}

int log_parse_level(const char *s, log_level_t *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (log_level_t)i;
            return 0;
        }
    return -1;
}

void log_event(log_level_t level, const char *msg, const char *fmt, ...) {
    if (level < threshold) return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    flockfile(stderr); /* one event, one line, even with many threads logging */
    if (as_json) {
        fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"", stamp, names[level], msg);
        logfmt_to_json(stderr, line);
        fputs("}\n", stderr);
    } else {
        fprintf(stderr, "ts=%s level=%s msg=%s %s\n", stamp, names[level], msg, line);
    }
    funlockfile(stderr);
}
