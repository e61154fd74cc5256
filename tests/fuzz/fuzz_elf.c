/* fuzz_elf.c - libFuzzer harness: the symbolization reader over hostile ELF files
 * (libelf/libdw through elfobj_t: headers, program headers, DWARF, symbols, and the Go
 * .gopclntab inside them) and over a raw .gopclntab alone. */
#include <sys/mman.h>
#include <unistd.h>

#include "symbolize/elf.h"
#include "symbolize/pclntab.h"

static void resolve_some(elfobj_t *o) {
    frames_t f = {0};
    static const uint64_t ADDRS[] = {0, 0x1000, 0x401000, 0x463784, 0x4d460e, 0x6491de, UINT64_MAX - 1};
    for (size_t i = 0; i < sizeof ADDRS / sizeof *ADDRS; i++) {
        uint64_t v = elfobj_normalize(o, ADDRS[i], 0x400000, 0x800000, 0x1000);
        elfobj_resolve(o, v, &f);
        elfobj_resolve(o, ADDRS[i], &f);
        frames_clear(&f);
    }
    frames_destroy(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    hr_err_t err = {0};
    pclntab_t *t = pclntab_open(data, n, &err);
    if (t) {
        frames_t f = {0};
        for (uint64_t pc = 0x401000; pc < 0x401100; pc += 0x11) pclntab_resolve(t, pc, &f);
        frames_destroy(&f);
        pclntab_free(t);
    }
    int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (write(fd, data, n) != (ssize_t)n) {
        close(fd);
        return 0;
    }
    elfobj_t *o = elfobj_open_fd(fd, &err);
    if (o) {
        resolve_some(o);
        elfobj_close(o);
    }
    return 0;
}
