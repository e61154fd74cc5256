/* jsonw.c - see jsonw.h. */
#include "common/jsonw.h"

#include <string.h>

void jsonw_strn(buf_t *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    buf_putc(b, '"');
    const char *run = s, *end = s + n;
    for (; s < end; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        buf_append(b, run, (size_t)(s - run));
        run = s + 1;
        if (c == '"') buf_append(b, "\\\"", 2);
        else if (c == '\\') buf_append(b, "\\\\", 2);
        else if (c == '\n') buf_append(b, "\\n", 2);
        else if (c == '\t') buf_append(b, "\\t", 2);
        else {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_append(b, u, 6);
        }
    }
    buf_append(b, run, (size_t)(s - run));
    buf_putc(b, '"');
}

void jsonw_str(buf_t *b, const char *s) { jsonw_strn(b, s, strlen(s)); }
