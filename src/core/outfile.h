/* outfile: the one way a file other than a checkpoint is written (core/outfile.c): to
 * "<path>.tmp", flushed, synced and renamed over <path>, so that a reader never sees half a
 * file; SIGINT / SIGTERM meanwhile remove the temp file and say which output was not written
 * (het_interrupt_output). Internal to the library (and the command). */
#ifndef HET_CORE_OUTFILE_H
#define HET_CORE_OUTFILE_H

#include <stdio.h>

#include "hetrain/core.h"

typedef struct het_outfile {
    FILE *f;                     /* write here between open and commit */
    char path[HET_PATH_LEN];
    char tmp[HET_PATH_LEN + 8];
} het_outfile;

/* Creates path.tmp; `what` names the output for the interrupt line ("ONNX export"). HET_EINVAL
 * for a path too long, HET_EIO "PATH.tmp: cannot create: ...". */
int het_outfile_open(het_outfile *o, const char *path, const char *what);
/* Checks the writes, flushes, syncs, closes and renames; on any failure removes the temp file.
 * HET_EIO "PATH: write failed: ...". Always leaves o closed. */
int het_outfile_commit(het_outfile *o);
/* Closes and removes the temp file (a write given up). */
void het_outfile_abort(het_outfile *o);

#endif
