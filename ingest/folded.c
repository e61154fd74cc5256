/* folded.c - see folded.h. */
#include "ingest/folded.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "storage/labels.h"

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

int folded_decode(const char *text, size_t n, int lines, int64_t scale, batch_t *b, batch_profile_t *p,
                  hr_err_t *err) {
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
