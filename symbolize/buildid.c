/* buildid.c - see buildid.h.
 *
 * libelf walks the sections and their notes (it checks every offset and size against
 * the file); the `.text` hash streams the section's file bytes through OpenSSL's
 * SHA-1, so a hostile file costs one pass over what it actually holds. */
#include "symbolize/buildid.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define NT_GO_BUILD_ID 4
#define MAX_ID_BYTES 128 /* build_id_valid's 256 hex digits */

/* The IDs a file carries, as hex ("" for one it lacks). */
typedef struct {
    char gnu[2 * MAX_ID_BYTES + 1], go[2 * MAX_ID_BYTES + 1], text[41];
} ids_t;

static void to_hex(const unsigned char *p, size_t n, char *out) {
    if (n > MAX_ID_BYTES) n = 0; /* longer than any valid ID: proves nothing */
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
    out[2 * n] = 0;
}

static void read_notes(Elf_Data *d, ids_t *ids) {
    GElf_Nhdr nh;
    size_t off = 0, name, desc;
    while (d && (off = gelf_getnote(d, off, &nh, &name, &desc)) > 0) {
        const char *owner = (const char *)d->d_buf + name;
        const unsigned char *value = (const unsigned char *)d->d_buf + desc;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(owner, "GNU", 4))
            to_hex(value, nh.n_descsz, ids->gnu);
        else if (nh.n_type == NT_GO_BUILD_ID && nh.n_namesz == 3 && !memcmp(owner, "Go", 3))
            to_hex(value, nh.n_descsz, ids->go);
    }
}

/* SHA-1 of a section's bytes as the file holds them. 0, or -1 out of memory. */
static int hash_section(Elf_Scn *scn, char out[41]) {
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || !d->d_buf) return 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[20];
    unsigned mdn = 0;
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) && EVP_DigestUpdate(ctx, d->d_buf, d->d_size) &&
             EVP_DigestFinal_ex(ctx, md, &mdn) && mdn == 20;
    EVP_MD_CTX_free(ctx);
    if (ok) to_hex(md, 20, out);
    return ok ? 0 : -1;
}

static int read_ids(Elf *e, ids_t *ids, hr_err_t *err) {
    memset(ids, 0, sizeof *ids);
    size_t shstr;
    if (!e || elf_kind(e) != ELF_K_ELF) return hr_fail(err, HR_EINVAL, "the body is not an ELF file");
    if (elf_getshdrstrndx(e, &shstr)) shstr = 0;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        const char *name = shstr ? elf_strptr(e, shstr, sh.sh_name) : NULL;
        if (sh.sh_type == SHT_NOTE) read_notes(elf_getdata(scn, NULL), ids);
        else if (sh.sh_type == SHT_PROGBITS && name && !strcmp(name, ".text") && hash_section(scn, ids->text))
            return hr_fail(err, HR_ENOMEM, "cannot compute SHA-1");
    }
    return 0;
}

static int check(Elf *e, const char *id, hr_err_t *err) {
    ids_t ids;
    if (read_ids(e, &ids, err)) return -1;
    if (!strcasecmp(ids.gnu, id) || !strcasecmp(ids.go, id) || !strcasecmp(ids.text, id)) return 0;
    if (!ids.gnu[0] && !ids.go[0] && !ids.text[0])
        return hr_fail(
            err, HR_EINVAL,
            "the file proves no build ID (no GNU or Go build-id note, no .text): it cannot be stored as %.80s", id);
    return hr_fail(err, HR_EINVAL, "the file is not build ID %.80s: it carries%s%.40s%s%.40s%s%s", id,
                   ids.gnu[0] ? " GNU build ID " : "", ids.gnu, ids.go[0] ? " Go build ID (hex) " : "", ids.go,
                   ids.text[0] ? " .text SHA-1 " : "", ids.text);
}

int buildid_check_file(const char *path, const char *id, hr_err_t *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hr_fail(err, HR_EIO, "cannot read the upload: %s", strerror(errno));
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int rc = check(e, id, err);
    elf_end(e);
    close(fd);
    return rc;
}
