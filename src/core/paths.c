/* File identity for the outputs-against-inputs check (paths.h). A path is reduced to an
 * identity without creating or opening anything:
 *   it exists (links followed)       device and inode (stat);
 *   a link whose target is missing   that target, followed link by link (at most 40), then
 *                                    as a missing path;
 *   missing                          its folder resolved (realpath) joined with its name, or
 *                                    the text itself when the folder does not exist either.
 * So 'm.jsonl' -> 'c.ckpt' is the checkpoint, './a' is 'a', and a dangling 'x' -> 'y' is 'y'. */
#define _XOPEN_SOURCE 700 /* realpath, readlink, lstat */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"
#include "hetrain/core.h"

typedef struct file_id {
    int exists;
    dev_t dev;
    ino_t ino;
    char where[2 * PATH_MAX + 2]; /* missing files: the resolved location */
} file_id;

/* The folder of p (".": none) into dir and its last component into *base. */
static void split(const char *p, char *dir, size_t n, const char **base) {
    const char *s = strrchr(p, '/');
    if (!s) {
        snprintf(dir, n, ".");
        *base = p;
    } else if (s == p) {
        snprintf(dir, n, "/");
        *base = s + 1;
    } else {
        snprintf(dir, n, "%.*s", (int)(s - p), p);
        *base = s + 1;
    }
}

static void identify(const char *path, file_id *id) {
    char cur[PATH_MAX], next[PATH_MAX], dir[PATH_MAX], res[PATH_MAX];
    struct stat sb;
    memset(id, 0, sizeof *id);
    snprintf(cur, sizeof cur, "%s", path);
    if (stat(cur, &sb) == 0) {
        id->exists = 1;
        id->dev = sb.st_dev;
        id->ino = sb.st_ino;
        return;
    }
    /* missing: follow a dangling link to the file it would create */
    for (int hop = 0; hop < 40 && lstat(cur, &sb) == 0 && S_ISLNK(sb.st_mode); hop++) {
        ssize_t k = readlink(cur, next, sizeof next - 1);
        if (k <= 0) break;
        next[k] = '\0';
        const char *base;
        split(cur, dir, sizeof dir, &base);
        int w = next[0] == '/' || strcmp(dir, ".") == 0
                    ? snprintf(cur, sizeof cur, "%s", next)
                    : snprintf(cur, sizeof cur, "%s/%s", dir, next);
        if (w < 0 || (size_t)w >= sizeof cur) break; /* too long to be created anyway */
    }
    const char *base;
    split(cur, dir, sizeof dir, &base);
    int w = realpath(dir, res)
                ? snprintf(id->where, sizeof id->where, "%s/%s", strcmp(res, "/") ? res : "", base)
                : snprintf(id->where, sizeof id->where, "%s", cur);
    if (w < 0 || (size_t)w >= sizeof id->where) /* too long to be created: compare the text */
        snprintf(id->where, sizeof id->where, "%.4000s", path);
}

static int same_id(const file_id *a, const file_id *b) {
    if (a->exists != b->exists) return 0;
    if (a->exists) return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->where, b->where) == 0;
}

int het_paths_same(const char *a, const char *b) {
    file_id x, y;
    identify(a, &x);
    identify(b, &y);
    return same_id(&x, &y);
}

int het_paths_check(const het_path_use *u, int n) {
    file_id *id = calloc((size_t)(n > 0 ? n : 1), sizeof *id);
    if (!id) return het_error_set(HET_ENOMEM, "out of memory comparing paths");
    for (int i = 0; i < n; i++)
        if (u[i].path && u[i].path[0]) identify(u[i].path, &id[i]);
    int st = HET_OK;
    /* outputs first in the message: the option to change */
    for (int i = 0; i < n && !st; i++) {
        if (!u[i].path || !u[i].path[0] || !(u[i].role & HET_PATH_OUT)) continue;
        for (int j = 0; j < n && !st; j++) {
            if (j == i || !u[j].path || !u[j].path[0]) continue;
            if ((u[j].role & HET_PATH_OUT) && j < i) continue; /* that pair came first */
            if (same_id(&id[i], &id[j]))
                st = het_error_set(HET_EINVAL, "%s: '%s' is also the %s%s '%s'; give each its "
                                   "own path", u[i].what, u[i].path, u[j].what,
                                   strstr(u[j].what, "file") ? "" : " file", u[j].path);
        }
    }
    free(id);
    return st;
}
