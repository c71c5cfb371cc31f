/* infile: the one way every reader of a file opens it (core/infile.c). Internal to the library.
 *
 * DESIGN. A reader must not block on what is not a file (a FIFO given as a model file used to
 * hang the run before its first line), must not read a file twice (sniffing it, then reading
 * it: a FIFO or a file that changes in between gives two different answers), must bound what
 * it reads before it allocates, and must name the file in every error. So each reader opens
 * through het_infile_open: open(O_RDONLY | O_NONBLOCK) (which does not wait for a FIFO's
 * writer), fstat, refuse a directory or anything but a regular file, refuse a size over the
 * reader's bound, and only then clear O_NONBLOCK and hand out the descriptor. Whole-file
 * readers (model files, ONNX, config, cost tables, speeds) take the bytes once with
 * het_infile_load; streaming readers (IDX, CIFAR, safetensors) take a FILE with
 * het_infile_fopen. Every message is one line, "PATH: ..., expected WHAT". */
#ifndef HET_CORE_INFILE_H
#define HET_CORE_INFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Opens `path` for reading as above; `what` names what the file should be ("a model file"),
 * for messages; `max_bytes` bounds its size (0: no bound). *fd (owned by the caller) and
 * *size (may be NULL) on success. HET_EIO: cannot open or stat, a directory, not a regular
 * file; HET_EFORMAT: larger than max_bytes. */
int het_infile_open(const char *path, const char *what, uint64_t max_bytes, int *fd,
                    uint64_t *size);

/* het_infile_open, then fdopen: *f owned by the caller (fclose). Errors as het_infile_open. */
int het_infile_fopen(const char *path, const char *what, uint64_t max_bytes, FILE **f,
                     uint64_t *size);

/* Reads the whole file once into a malloc'd buffer (*buf, owned by the caller, NUL-terminated
 * after its *n bytes). Errors as het_infile_open, HET_ENOMEM, HET_EIO on a read error or a
 * file that changes size while it is read. */
int het_infile_load(const char *path, const char *what, uint64_t max_bytes, uint8_t **buf,
                    size_t *n);

/* The reading half of het_infile_load, on a descriptor from het_infile_open (not closed). */
int het_infile_read_all(const char *path, int fd, uint64_t size, const char *what,
                        uint8_t **buf, size_t *n);

/* Reads n bytes at offset off (pread, retried on EINTR); *got < n at the end of the file.
 * HET_EIO "PATH: offset N: read error: ..." */
int het_infile_pread(const char *path, int fd, uint64_t off, void *dst, size_t n, size_t *got);

/* The bytes a reader may plan to hold in memory: the machine's physical memory, or
 * HET_MEMORY_LIMIT when set (a number of bytes > 0). Sizes that files announce (a model's
 * weights, an IDX payload) are checked against it before anything of that size is
 * allocated. */
double het_infile_memory(void);

#endif
