/* timeparse.h - the time formats Hearth accepts in URLs.
 *
 * As Pyroscope reads them: "now", "now-1h" (units s, m, h, d, w; also "now-30s",
 * "now+5m"), RFC 3339 ("2026-12-02T14:00:00Z", offsets and fractions allowed), and a
 * run of digits read by its length: 8 = YYYYMMDD, 13 = milliseconds,
 * 16 = microseconds, 19 = nanoseconds, any other length = seconds. */
#ifndef HEARTH_TIMEPARSE_H
#define HEARTH_TIMEPARSE_H

#include <stdint.h>

int64_t time_now_ns(void);
/* The monotonic clock in ns: for durations and deadlines, which a wall clock step must not move. */
int64_t time_mono_ns(void);
/* Parses s into unix nanoseconds. Returns 0, or -1 when s is not a known form. */
int time_parse(const char *s, int64_t now_ns, int64_t *out_ns);
/* Parses a duration like "10s", "5m", "1h30m", "7d", "250ms" into nanoseconds: one
 * or more numbers, each with a unit (ns us ms s m h d w y). A bare number is refused:
 * "7" could mean seconds or days, and guessing wrong deletes data (--retention). */
int duration_parse(const char *s, int64_t *out_ns);

#endif
