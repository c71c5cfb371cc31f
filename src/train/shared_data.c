/* DESIGN: one decoded copy of the datasets per host.
 *
 * P ranks on one machine used to decode P copies of the same images (Fashion-MNIST: 55 MB
 * each, 3.5 GB for 64 emulated ranks), as P ranks on one node of a real cluster would. Under
 * MPI with several ranks on a host, the lowest rank of each real host (MPI_Comm_split_type
 * SHARED over the world: the machine, not the emulated nodes of --ranks-per-node) loads and
 * validates the data as one rank always did; all ranks agree on its status over the world, so
 * a loader failing on one host ends every rank with its line. The leader then broadcasts the
 * sets' descriptions inside the host (counts, shape, classes, normalization: all of het_dataset
 * but its two pointers), copies the bytes into an MPI-3 shared window (MPI_Win_allocate_shared,
 * all of it in the leader's segment) and frees its private copy; the other ranks point their
 * het_dataset at that segment (MPI_Win_shared_query). Nothing writes into images or labels
 * after loading (het_dataset_gather reads them into the float batch: normalization goes to the
 * batch, never back), and every rank maps the segment's whole pages read-only (mprotect), so a
 * stray write faults instead of changing the data of every rank of the host. Best effort: a
 * failing mprotect leaves the pages writable and changes nothing else. het_dataset.borrowed
 * keeps het_dataset_free off the window; het_trainer_free_data frees the window (collective
 * over the host), before MPI_Finalize.
 *
 * Private copies, as before: without MPI or on one rank (the old path, bitwise), on a host with
 * one rank, with HET_SHARED_DATA=0 on any rank of the host, or when a host's ranks name
 * different data, data directories, synthetic shapes or class counts (node-local paths may hold different files, which the
 * data comparison of consistency.c must still see). The host decides with one all-reduce, so its
 * ranks never part between collectives.
 *
 * Memory: the leader holds both copies while it copies (its peak RSS counts the dataset twice).
 * A page of the window counts in the resident set of every rank that has read it, so the sum of
 * peak RSS over ranks counts shared pages several times; the proportional set size (PSS,
 * /proc/self/smaps_rollup) divides each page among the processes that map it, so the PSS sum
 * is what the host holds. */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "train/trainer.h"

/* One line naming the MPI call and MPI's error; for the window, the way around it. */
static int mpi_fail(int err, const char *what, int window) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return het_error_set(HET_EMPI, "datasets: %s failed: %s%s", what, msg, window ?
                         " (HET_SHARED_DATA=0 loads a copy per rank instead of one per host)"
                         : "");
}

/* FNV-1a of a string and its terminator, so that ("ab", "c") and ("a", "bc") differ. */
static uint64_t fnv(uint64_t h, const char *s) {
    do h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    while (*s++);
    return h;
}

/* Offsets of train images, train labels, test images, test labels in the window, each at a
 * 64-byte boundary; returns the window's size. */
static size_t layout(const het_dataset set[2], size_t off[4]) {
    size_t o = 0;
    for (int k = 0; k < 4; k++) {
        const het_dataset *d = &set[k / 2];
        size_t len = (size_t)d->n * (k % 2 ? 1 : het_shape_size(d->shape));
        off[k] = o;
        o += (len + 63) & ~(size_t)63;
    }
    return o;
}

static uint64_t data_bytes(const het_dataset *d) {
    return (uint64_t)d->n * (het_shape_size(d->shape) + 1);
}

/* The host's communicator and whether its ranks share one copy: all want it (HET_SHARED_DATA
 * is not 0) and name the same dataset (data, data directory, synthetic shape and classes: what
 * het_train_data_load reads). Collective over the world. */
static int host_decide(het_trainer *t, int *share) {
    const het_train_config *c = &t->cfg;
    *share = 0;
    int err = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->rank, MPI_INFO_NULL,
                                  &t->host);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Comm_split_type", 0);
    t->have_host = 1;
    MPI_Comm_set_errhandler(t->host, MPI_ERRORS_RETURN); /* a full /dev/shm: one line */
    MPI_Comm_rank(t->host, &t->host_rank);
    MPI_Comm_size(t->host, &t->host_size);
    const char *env = getenv("HET_SHARED_DATA");
    char classes[48];
    snprintf(classes, sizeof classes, "%d %lld", c->classes, (long long)c->synthetic_samples);
    uint64_t key = fnv(fnv(fnv(fnv(0xcbf29ce484222325ULL, c->data), c->data_dir),
                           c->synthetic_shape), classes);
    uint64_t v[3] = {!(env && strcmp(env, "0") == 0), key, ~key};
    MPI_Request req;
    err = MPI_Iallreduce(MPI_IN_PLACE, v, 3, MPI_UINT64_T, MPI_MIN, t->host, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(t->host, "allreduce", &req);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Iallreduce over the host", 0);
    t->data_why = t->host_size == 1 ? "one rank per host"
                  : !v[0]            ? "HET_SHARED_DATA=0"
                  : v[1] != ~v[2]    ? "the host's ranks name different datasets"
                                     : NULL;
    *share = t->data_why == NULL;
    return HET_OK;
}

/* The leader's loaded sets into a window of the host; every rank points at it. Collective over
 * the host. */
static int share_window(het_trainer *t) {
    het_dataset *set[2] = {&t->train, &t->test}, hdr[2] = {t->train, t->test};
    MPI_Request req;
    int err = MPI_Ibcast(hdr, (int)sizeof hdr, MPI_BYTE, 0, t->host, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(t->host, "bcast", &req);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Ibcast over the host", 1);
    for (int k = 0; k < 2; k++) { /* the leader's pointers mean nothing here */
        hdr[k].images = hdr[k].labels = NULL;
        hdr[k].borrowed = 0;
    }
    size_t off[4], total = layout(hdr, off);
    uint8_t *mem = NULL;
    err = MPI_Win_allocate_shared(t->host_rank == 0 ? (MPI_Aint)total : 0, 1, MPI_INFO_NULL,
                                  t->host, &mem, &t->data_win);
    if (err != MPI_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "MPI_Win_allocate_shared of %zu bytes", total);
        return mpi_fail(err, what, 1);
    }
    t->have_win = 1;
    MPI_Aint size = 0;
    int disp = 0;
    err = MPI_Win_shared_query(t->data_win, 0, &size, &disp, &mem);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Win_shared_query", 1);
    if ((size_t)size < total)
        return het_error_set(HET_EMPI, "datasets: the host's window holds %lld bytes, "
                             "expected %zu", (long long)size, total);
    /* the memory model's pattern for load/store in a shared window (MPI 3.1, 11.7): writes,
     * sync, barrier, sync, then reads */
    if ((err = MPI_Win_lock_all(MPI_MODE_NOCHECK, t->data_win)) != MPI_SUCCESS)
        return mpi_fail(err, "MPI_Win_lock_all", 1);
    for (int k = 0; k < 2 && t->host_rank == 0; k++) {
        size_t n = (size_t)set[k]->n;
        if (n) memcpy(mem + off[2 * k], set[k]->images, n * het_shape_size(set[k]->shape));
        if (n) memcpy(mem + off[2 * k + 1], set[k]->labels, n);
        het_dataset_free(set[k]);
    }
    for (int k = 0; k < 2; k++) {
        *set[k] = hdr[k];
        set[k]->images = mem + off[2 * k];
        set[k]->labels = mem + off[2 * k + 1];
        set[k]->borrowed = 1;
    }
    MPI_Win_sync(t->data_win);
    err = MPI_Ibarrier(t->host, &req);
    if (err == MPI_SUCCESS) err = het_stall_collective(t->host, "barrier", &req);
    MPI_Win_sync(t->data_win);
    MPI_Win_unlock_all(t->data_win);
    if (err != MPI_SUCCESS) return mpi_fail(err, "MPI_Ibarrier over the host", 1);
    /* read-only from here on: the window's whole pages (MPI's own state lies outside them) */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)mem + page - 1) / page * page;
    uintptr_t hi = ((uintptr_t)mem + total) / page * page;
    if (hi > lo && mprotect((void *)lo, hi - lo, PROT_READ) == 0) {
        t->ro_base = (void *)lo;
        t->ro_len = hi - lo;
    }
    return HET_OK;
}

int het_trainer_load_data(het_trainer *t) {
    const het_train_config *c = &t->cfg;
    int share = 0, st = HET_OK;
    t->data_why = "one process";
    if (t->mpi && t->size > 1) st = host_decide(t, &share);
    if (!st && (!share || t->host_rank == 0))
        st = het_train_data_load(c, &t->train, &t->test);
    if ((st = het_trainer_agree(t, st))) return st;
    if (share && (st = het_trainer_agree(t, share_window(t)))) return st;
    t->data_bytes = data_bytes(&t->train) + data_bytes(&t->test);
    /* the copies held over the world: one per host that shares, one per rank elsewhere */
    int v[2] = {share ? t->host_rank == 0 : 1, !t->have_host || t->host_rank == 0};
    if (t->mpi && t->size > 1) {
        MPI_Request req;
        int err = MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        if (err == MPI_SUCCESS) err = het_stall_collective(MPI_COMM_WORLD, "allreduce", &req);
        if (err != MPI_SUCCESS) st = mpi_fail(err, "MPI_Iallreduce", 0);
    }
    t->data_copies = v[0];
    t->data_hosts = v[1];
    return het_trainer_agree(t, st);
}

void het_trainer_free_data(het_trainer *t) {
    het_dataset_free(&t->train);
    het_dataset_free(&t->test);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return; /* MPI took the window with it */
    if (t->ro_len) mprotect(t->ro_base, t->ro_len, PROT_READ | PROT_WRITE);
    t->ro_len = 0;
    if (t->have_win) MPI_Win_free(&t->data_win);
    if (t->have_host) MPI_Comm_free(&t->host);
    t->have_win = t->have_host = 0;
}

/* ----------------------------------------------------------------------- memory */

/* This process's peak resident set in bytes (Linux reports KiB). */
static int64_t peak_rss(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (int64_t)u.ru_maxrss * 1024 : 0;
}

/* This process's proportional set now in bytes, or -1 without /proc/self/smaps_rollup. */
static int64_t pss_now(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (kb < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "Pss: %lld kB", &kb) != 1) kb = -1;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

int het_trainer_memory(het_trainer *t, int64_t *rss_max, int64_t *rss_sum, int64_t *pss_sum) {
    int64_t mine[2] = {peak_rss(), pss_now()}, *all = mine;
    if (t->mpi && t->size > 1) {
        all = malloc((size_t)t->size * sizeof mine);
        int st = het_trainer_agree(t, all ? HET_OK : het_error_set(HET_ENOMEM, "out of memory "
                                                                    "gathering the ranks' memory"));
        if (st) {
            free(all);
            return st;
        }
        MPI_Request req;
        int err = MPI_Iallgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, MPI_COMM_WORLD,
                                 &req);
        if (err == MPI_SUCCESS) err = het_stall_collective(MPI_COMM_WORLD, "allgather", &req);
        if (err != MPI_SUCCESS) {
            free(all);
            return het_trainer_agree(t, mpi_fail(err, "MPI_Iallgather", 0));
        }
    }
    *rss_max = *rss_sum = *pss_sum = 0;
    for (int q = 0; q < t->size; q++) {
        if (all[2 * q] > *rss_max) *rss_max = all[2 * q];
        *rss_sum += all[2 * q];
        if (*pss_sum >= 0) *pss_sum = all[2 * q + 1] < 0 ? -1 : *pss_sum + all[2 * q + 1];
    }
    if (all != mine) free(all);
    return HET_OK;
}
