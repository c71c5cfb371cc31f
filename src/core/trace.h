/* Trace recording: complete events (name, thread lane, argument, start, end) kept in memory by
 * one process, for the Chrome trace JSON that train/trace.c gathers from every rank and writes.
 * Any layer may record (strategies, the step machinery, the trainer), from any thread: adding
 * is serialized by a mutex. Event names are the caller's: a string that outlives the trace (a
 * literal). Internal to the library. */
#ifndef HET_CORE_TRACE_H
#define HET_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Lanes ("tid") of a rank's timeline. */
enum { HET_TID_COMPUTE = 0, HET_TID_COMM = 1, HET_TID_FORWARD = 2 /* qfb: a stage's forward thread */ };

typedef struct het_trace het_trace;

/* An empty trace whose time origin is now. HET_ENOMEM on failure. */
int  het_trace_create(het_trace **out);
void het_trace_free(het_trace *t);
/* Moves the origin (e.g. right after a barrier that aligns the ranks). */
void het_trace_set_origin(het_trace *t, double origin);
/* Records [t0, t1] (het_now() seconds) named `name` on lane tid; `arg` is shown as args.i
 * (step, bucket, layer). NULL t: nothing. Thread-safe. Beyond a cap (2^20 events) events are
 * counted as dropped. */
void het_trace_add(het_trace *t, const char *name, int tid, int arg, double t0, double t1);
/* This process's events as JSON objects with "pid" = pid, each preceded by ",\n" (so the texts of
 * several ranks concatenate into one array after a first element). *text is malloc'ed (caller
 * frees); *len its length; *n_events and *dropped the counts. HET_ENOMEM on failure. */
int  het_trace_format(het_trace *t, int pid, char **text, size_t *len, int64_t *n_events,
                      int64_t *dropped);

#endif
