/* log.h - one line per event, logfmt or JSON, to stderr.
 *
 * The level threshold is process-wide configuration set once at start-up (the one
 * piece of global state, as in every server's logger); messages never carry
 * request bodies or credentials. */
#ifndef HEARTH_LOG_H
#define HEARTH_LOG_H

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level_t;

void log_set_level(log_level_t level);
/* 1: write each event as one JSON object instead of logfmt. */
void log_set_json(int json);
/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int log_parse_level(const char *s, log_level_t *out);
/* msg is a short event name; fmt adds logfmt key=value pairs. */
void log_event(log_level_t level, const char *msg, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_info(msg, ...) log_event(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_event(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_event(LOG_ERROR, msg, __VA_ARGS__)
#define log_debug(msg, ...) log_event(LOG_DEBUG, msg, __VA_ARGS__)

#endif
