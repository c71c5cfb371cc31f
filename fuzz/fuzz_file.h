/* Shared by the fuzz targets: the input becomes a file, so that each target calls the real
 * public reader on a path, exactly as the command does. The file is a memfd (no disk I/O),
 * rewritten for every input; its path is /proc/self/fd/N. (CMake defines _GNU_SOURCE for the
 * targets, for memfd_create.) */
#ifndef HET_FUZZ_FILE_H
#define HET_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hetrain.h>

/* The path of a file holding data[0..n); slot 0..3 keeps up to four files at once. */
static inline const char *fuzz_file(int slot, const uint8_t *data, size_t n) {
    static int fd[4] = {-1, -1, -1, -1};
    static char path[4][64];
    if (fd[slot] < 0) {
        fd[slot] = memfd_create("het_fuzz", 0);
        if (fd[slot] < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path[slot], sizeof path[slot], "/proc/self/fd/%d", fd[slot]);
    }
    if (ftruncate(fd[slot], 0) != 0) abort();
    size_t done = 0;
    while (done < n) {
        ssize_t k = pwrite(fd[slot], data + done, n - done, (off_t)done);
        if (k <= 0) abort();
        done += (size_t)k;
    }
    return path[slot];
}

/* A library call must fail with a negative status and a one-line message naming something,
 * or succeed: anything else is a bug the fuzzer should report (abort). */
static inline void fuzz_check_status(int st) {
    const char *m = het_error_msg();
    int bad = st > 0 || (st < 0 && (!m || !*m || strchr(m, '\n')));
    if (bad) {
        fprintf(stderr, "fuzz: status %d, message '%s'\n", st, m ? m : "(null)");
        abort();
    }
}

#endif
