/* outfile: the one way hetrain replaces a file (core/outfile.c). Every output (checkpoints,
 * exports, traces, speeds files, cost tables, platform files, compare's tables) is written to
 * "<path>.tmp" in the same directory, flushed and fsynced, renamed over <path>, and then the
 * directory is fsynced, so that a reader, a crash or a power cut finds either the old file or
 * the new one, whole, never half of one (tests/test_kill_writes.sh kills every writer at many
 * points). SIGINT / SIGTERM meanwhile remove the temp file: an output says it was not written
 * (het_interrupt_output), a checkpoint says which checkpoint is on disk (het_interrupt_temp).
 * Internal to the library (and the command). */
#ifndef HET_CORE_OUTFILE_H
#define HET_CORE_OUTFILE_H

#include <stdio.h>

#include "hetrain/core.h"

typedef struct het_outfile {
    FILE *f;                     /* write here between open and commit */
    char path[HET_PATH_LEN];
    char tmp[HET_PATH_LEN + 8];
    int checkpoint;              /* 1: registered as the checkpoint, not as an output */
} het_outfile;

/* Creates path.tmp; `what` names the output for the interrupt line ("ONNX export"). HET_EINVAL
 * for a path too long, HET_EIO "PATH.tmp: cannot create: ...". */
int het_outfile_open(het_outfile *o, const char *path, const char *what);
/* The same for a checkpoint: the handler removes the temp file and names the checkpoint on
 * disk (het_interrupt_temp / het_interrupt_renaming / het_interrupt_committed). */
int het_outfile_open_checkpoint(het_outfile *o, const char *path);
/* Checks the writes, flushes, fsyncs, closes, renames, fsyncs the directory; on any failure
 * removes the temp file (the old file, if any, stays). HET_EIO "PATH: write failed: ..." (a
 * checkpoint: "PATH.tmp: flush failed / close failed / cannot rename to PATH: ..."). Always
 * leaves o closed. */
int het_outfile_commit(het_outfile *o);
/* Closes and removes the temp file (a write given up). */
void het_outfile_abort(het_outfile *o);

#endif
