/* outfile: replacing a file durably (see core/outfile.h).
 *
 * DESIGN. The order is what makes it durable: the data reaches the disk (fsync of the file)
 * before the name does (rename), and the rename reaches the disk (fsync of the directory)
 * before the commit returns, so that the caller's next step (a metrics line saying a
 * checkpoint exists, a run that goes on) never refers to a file a power cut could take away.
 * The temp file is in the same directory, so the rename never crosses file systems and is
 * atomic. The directory's fsync is best effort: some file systems refuse it (EINVAL) and
 * there is nothing a caller could do about it. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/outfile.h"

static int open_tmp(het_outfile *o, const char *path, const char *what, int checkpoint) {
    memset(o, 0, sizeof *o);
    size_t len = strlen(path);
    if (len == 0 || len >= HET_PATH_LEN)
        return het_error_set(HET_EINVAL, "%s path '%s': empty or longer than %d bytes", what,
                             path, HET_PATH_LEN - 1);
    memcpy(o->path, path, len + 1);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", path);
    o->checkpoint = checkpoint;
    if (checkpoint) {
        het_interrupt_temp(o->tmp); /* SIGINT / SIGTERM remove it from now on */
    } else {
        char msg[HET_PATH_LEN + 64];
        snprintf(msg, sizeof msg, "%s %s", what, path);
        het_interrupt_output(o->tmp, msg);
    }
    o->f = fopen(o->tmp, "wb");
    if (!o->f) {
        int err = errno;
        if (checkpoint) het_interrupt_temp(NULL);
        else het_interrupt_output(NULL, NULL);
        return het_error_set(HET_EIO, "%s: cannot create: %s", o->tmp, strerror(err));
    }
    return HET_OK;
}

int het_outfile_open(het_outfile *o, const char *path, const char *what) {
    return open_tmp(o, path, what, 0);
}

int het_outfile_open_checkpoint(het_outfile *o, const char *path) {
    return open_tmp(o, path, "checkpoint", 1);
}

/* fsync of the directory holding path, so that the rename survives a power cut. */
static void sync_dir(const char *path) {
    char dir[HET_PATH_LEN];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static void unregister(const het_outfile *o) {
    if (o->checkpoint) het_interrupt_temp(NULL);
    else het_interrupt_output(NULL, NULL);
}

/* Removes the temp file and records the failure of phase `what` ("flush failed"). */
static int fail(het_outfile *o, const char *what, int err) {
    remove(o->tmp);
    unregister(o);
    if (!o->checkpoint)
        return het_error_set(HET_EIO, "%s: write failed: %s", o->path, strerror(err));
    if (strcmp(what, "cannot rename") == 0)
        return het_error_set(HET_EIO, "%s: cannot rename to %s: %s", o->tmp, o->path,
                             strerror(err));
    return het_error_set(HET_EIO, "%s: %s: %s", o->tmp, what, strerror(err));
}

int het_outfile_commit(het_outfile *o) {
    if (!o->f) return het_error_set(HET_EIO, "%s: write failed: not open", o->path);
    FILE *f = o->f;
    o->f = NULL;
    int ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = ok ? 0 : errno ? errno : EIO;
    if (!ok) {
        fclose(f);
        return fail(o, "flush failed", err);
    }
    if (fclose(f) != 0) return fail(o, "close failed", errno);
    if (o->checkpoint) het_interrupt_renaming();
    else het_interrupt_output_renaming();
    if (rename(o->tmp, o->path) != 0) return fail(o, "cannot rename", errno);
    if (o->checkpoint) het_interrupt_committed();
    else het_interrupt_output(NULL, NULL);
    sync_dir(o->path);
    return HET_OK;
}

void het_outfile_abort(het_outfile *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    remove(o->tmp);
    unregister(o);
}
