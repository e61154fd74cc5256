/* decode_floor - the least CPU an upload can cost: gunzip plus protobuf-c decode of a
 * pprof body, nothing stored. The load benchmark runs it on the very files its agents
 * push and sets the server's CPU per upload beside it.
 *
 *   decode_floor ROUNDS FILE...   prints CPU milliseconds per file, averaged */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

#include "wire/profile.pb-c.h"

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) free(b), b = NULL;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Inflates a gzip body into *out (grown as needed); its length, or 0 on error. */
static size_t gunzip(const unsigned char *in, size_t len, unsigned char **out, size_t *cap) {
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)len;
    size_t have = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (have == *cap) {
            *cap = *cap ? *cap * 2 : 1 << 20;
            *out = realloc(*out, *cap);
        }
        z.next_out = *out + have;
        z.avail_out = (uInt)(*cap - have);
        rc = inflate(&z, Z_NO_FLUSH);
        have = *cap - z.avail_out;
    }
    inflateEnd(&z);
    return rc == Z_STREAM_END ? have : 0;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: decode_floor ROUNDS FILE...\n");
        return 2;
    }
    int rounds = atoi(argv[1]), nfiles = argc - 2;
    unsigned char *raw = NULL;
    size_t cap = 0;
    long decoded = 0;
    double t0 = cpu_ms(), io = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nfiles; i++) {
            double before_io = cpu_ms();
            size_t len;
            unsigned char *body = read_file(argv[2 + i], &len);
            io += cpu_ms() - before_io; /* reading the file is the server's network read, not decoding */
            size_t n = body ? gunzip(body, len, &raw, &cap) : 0;
            Perftools__Profiles__Profile *p = n ? perftools__profiles__profile__unpack(NULL, n, raw) : NULL;
            if (!p) {
                fprintf(stderr, "decode_floor: %s does not decode\n", argv[2 + i]);
                return 1;
            }
            decoded++;
            perftools__profiles__profile__free_unpacked(p, NULL);
            free(body);
        }
    printf("%.4f\n", (cpu_ms() - t0 - io) / (double)decoded);
    free(raw);
    return 0;
}
