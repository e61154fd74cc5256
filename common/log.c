/* log.c - see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static log_level_t threshold = LOG_INFO;
static const char *names[] = {"debug", "info", "warn", "error"};

void log_set_level(log_level_t level) { threshold = level; }

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
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s msg=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[level], msg);
    if (n < 0 || (size_t)n >= sizeof line) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
