/* Internal to nn/: the workers that split one training batch, as batch-coupled layers (batch
 * norm, the residual block) see them (team.c). At a meeting every active worker writes its
 * partial statistics into its own part, then het_team_exchange waits for all of them and
 * returns every worker's parts, which each worker combines itself in worker order 0, 1, ...:
 * the same bits on every worker and in every run with the same worker count.
 *
 * Only the active workers (those with samples; the executor sets their count for each batch)
 * meet; every active worker must meet as often as the others, i.e. run the same layers. */
#ifndef HET_NN_TEAM_H
#define HET_NN_TEAM_H

#include <stddef.h>

#include "hetrain/nn.h"

/* A team of up to `workers` with parts of `doubles` each. HET_ENOMEM on failure. */
int het_team_create(het_team **out, int workers, size_t doubles);
void het_team_free(het_team *t); /* NULL is fine */
/* Workers 0..active-1 take part in the meetings of the next run; call between runs. */
void het_team_begin(het_team *t, int active);
int het_team_size(const het_team *t);
/* Where worker widx writes its part for its next meeting (het_team_create's doubles). */
double *het_team_part(het_team *t, int widx);
/* Meets the other active workers; returns all parts, worker w's at w * *stride. The result
 * stays valid until this worker's next meeting (parts alternate between two buffers: nobody
 * writes a buffer again before everyone has left the meeting that read it). */
const double *het_team_exchange(het_team *t, int widx, size_t *stride);

#endif
