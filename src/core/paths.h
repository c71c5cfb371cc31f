/* paths: which files a command reads and writes are compared by identity, so that no output
 * overwrites an input or another output (core/paths.c). Used by the trainer's configuration
 * check (train, eval, export, calibrate) and by `hetrain compare`. Internal to the library. */
#ifndef HET_CORE_PATHS_H
#define HET_CORE_PATHS_H

#include <stddef.h>

enum { HET_PATH_IN = 1, HET_PATH_OUT = 2 };

/* One file a command uses. */
typedef struct het_path_use {
    const char *what; /* the option, or what the file is: "metrics", "data file", "config" */
    const char *path; /* NULL or "": none */
    int role;         /* HET_PATH_IN, HET_PATH_OUT or both (a checkpoint resumed and written) */
} het_path_use;

/* Fails when an output is the same file as any other entry (an input or an output): files are
 * compared by identity, device and inode of what the path resolves to (links followed); a path
 * that does not exist yet by its resolved location (the folder resolved, then the name), and a
 * symbolic link whose target does not exist yet as that target. Two inputs may be one file.
 * Touches no file. HET_EINVAL with one line "WHAT: 'PATH' is also the WHAT2 file 'PATH2';
 * give each its own path" (" file" left out where WHAT2 says it). */
int het_paths_check(const het_path_use *u, int n);

/* 1 when a and b name the same file by the identity above, else 0. */
int het_paths_same(const char *a, const char *b);

#endif
