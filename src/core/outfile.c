/* outfile: writing a file through a temp file and a rename (see core/outfile.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"

int het_outfile_open(het_outfile *o, const char *path, const char *what) {
    memset(o, 0, sizeof *o);
    size_t len = strlen(path);
    if (len == 0 || len >= HET_PATH_LEN)
        return het_error_set(HET_EINVAL, "%s path '%s': empty or longer than %d bytes", what,
                             path, HET_PATH_LEN - 1);
    memcpy(o->path, path, len + 1);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
    char msg[HET_PATH_LEN + 64];
    snprintf(msg, sizeof msg, "%s %s", what, path);
    het_interrupt_output(o->tmp, msg); /* SIGINT / SIGTERM remove it from now on */
    o->f = fopen(o->tmp, "wb");
    if (!o->f) {
        int err = errno;
        het_interrupt_output(NULL, NULL);
        return het_error_set(HET_EIO, "%s: cannot create: %s", o->tmp, strerror(err));
    }
    return HET_OK;
}

int het_outfile_commit(het_outfile *o) {
    if (!o->f) return het_error_set(HET_EIO, "%s: write failed: not open", o->path);
    int ok = !ferror(o->f) && fflush(o->f) == 0 && fsync(fileno(o->f)) == 0;
    int err = ok ? 0 : errno ? errno : EIO;
    if (fclose(o->f) != 0 && ok) ok = 0, err = errno;
    o->f = NULL;
    if (ok) het_interrupt_output_renaming();
    if (ok && rename(o->tmp, o->path) != 0) ok = 0, err = errno;
    if (!ok) remove(o->tmp);
    het_interrupt_output(NULL, NULL);
    if (!ok) return het_error_set(HET_EIO, "%s: write failed: %s", o->path, strerror(err));
    return HET_OK;
}

void het_outfile_abort(het_outfile *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    remove(o->tmp);
    het_interrupt_output(NULL, NULL);
}
