/* The arbiter (emul/arbiter.c): flows that ranks start at their own virtual times, completed in
 * virtual-time order once no rank can still start one that would change them (issue #36).
 *
 * A flow's completion depends on the flows other ranks start in the same span of virtual time,
 * while each rank's clock runs on its own. The arbiter holds every flow of a network (emul/flows.c:
 * max-min sharing) and the promise of every lane (a rank, or a thread with a clock of its own):
 * - a lane that runs at clock t starts no flow before t (het_arbiter_run; a post is at its clock);
 * - a lane that waits starts nothing until what it waits for ends: a flow it knows (a message
 *   posted), or a message from another lane not posted yet, which ends no earlier than that
 *   lane's promise plus a lookahead (the message's latency and least transfer time);
 * - a lane inside a collective resumes once every member is in: no earlier than the latest
 *   member's promise;
 * - a lane that left starts nothing more;
 * - a flow that waits for its receive (rendezvous) starts once matched to it, no earlier than its
 *   send and the first receive not matched yet that can take it (or the receiver's promise).
 * A waiting lane's promise follows the lanes it waits for (a shortest path over "waits for",
 * weighted by lookaheads; the latest member's for a collective); lanes that wait for each other
 * with nothing posted never start a flow again (a cycle, as in a program that deadlocks) and
 * hold nothing back. het_arbiter_settle
 * commits the network's next event while every lane's promise is at or past it, and adds a
 * posted flow to the network once every promise is past its start (Chandy-Misra-Bryant with
 * lookahead, the network the one logical process that all lanes feed).
 *
 * Exact and reproducible: a flow enters the network only when every flow that starts earlier or
 * at the same time has been posted, in the order (start, lane, the lane's own count), and the
 * network moves only from event to event, so the completions do not depend on the order in
 * which lanes report (how ranks interleave in wall time): the same bits as adding every flow
 * offline in that order (test_arbiter). A flow of 0 bytes takes no bandwidth and ends at start +
 * latency when posted. */
#ifndef HET_EMUL_ARBITER_H
#define HET_EMUL_ARBITER_H

#include "emul/flows.h"

typedef struct het_arbiter het_arbiter;

/* n_lanes lanes, each running at clock 0; a network of n_res resources (capacities bytes/s,
 * copied). NULL on failure (the message says why). */
het_arbiter *het_arbiter_new(int n_lanes, int n_res, const double *capacity);
void het_arbiter_free(het_arbiter *a);

/* Lane `lane` starts a flow at `start` (its clock: not before its promise), as
 * het_flows_add_weighted (weight NULL: all 1). Returns the flow's id (0, 1, ... in posting
 * order) or a negative status. The lane runs at `start` afterwards. */
int het_arbiter_post(het_arbiter *a, int lane, double start, double bytes, double latency,
                     double factor, const int *route, const double *weight, int n_route);
/* Rendezvous (a message that waits for its receive, as MPI's protocol for large messages): as
 * het_arbiter_post, a flow to lane `dest` on `stream` (a number both sides give alike) whose
 * bytes move from the later of `start` + `lag` (its header's time, which must come first) and
 * the posting of the receive that takes it (het_arbiter_match); until then it is pending and
 * holds back every flow that could start after it (no earlier than its start + lag and the
 * first receive of dest on the stream not matched yet that can take it, or dest's promise
 * when there is none). */
int het_arbiter_post_rdv(het_arbiter *a, int lane, double start, int dest, int stream,
                         double lag, double bytes, double latency, double factor,
                         const int *route, const double *weight, int n_route);
/* The lane posts a receive on `stream` from lane `src` (-1: any) at t (its clock: not before its
 * promise): returns its index on the stream (0, 1, ...), or a negative status. */
int het_arbiter_recv(het_arbiter *a, int lane, double t, int stream, int src);
/* The lane's receive r on `stream` takes flow `flow` (-1: nothing the arbiter carries, e.g. a
 * message that did not wait for it): a pending flow starts at the later of its send and the
 * receive's posting. Not a clock event (told later in wall time, about the past: safe, since
 * the pending flow held everything after its earliest start). */
int het_arbiter_match(het_arbiter *a, int lane, int stream, int r, int flow);
/* A flow's start (its send's time while pending), or -1; whether it still waits for its receive. */
double het_arbiter_start(const het_arbiter *a, int id);
int het_arbiter_pending(const het_arbiter *a, int id);
/* The lane runs with its clock at t (not before its last promise): it starts no flow before t. */
int het_arbiter_run(het_arbiter *a, int lane, double t);
/* The lane, its clock at t, waits until one of flows[0, n_flows) completes or a message comes
 * from one of the lanes from[0, n_from) (not posted yet; it takes at least lookahead[i] seconds
 * from its start to its end). Replaces the lane's previous wait. */
int het_arbiter_wait(het_arbiter *a, int lane, double t, const int *flows, int n_flows,
                     const int *from, const double *lookahead, int n_from);
/* The same, and the lane resumes at `until` at the latest (>= t): a message the arbiter does not
 * carry (inside a node) arrives then. */
int het_arbiter_wait_until(het_arbiter *a, int lane, double t, double until, const int *flows,
                           int n_flows, const int *from, const double *lookahead, int n_from);
/* The least end still possible for what waiting lane `lane` waits for and is not final (a
 * flow's bound as in its promise; a message not posted: its sender's promise at the last settle
 * + the lookahead), INFINITY if none: once above its `until`, nothing of its wait can end by
 * then. */
double het_arbiter_wait_bound(het_arbiter *a, int lane);
/* The lane enters collective `seq` (its number, from 1) of communicator `comm` (a key every
 * member gives alike) at t: it posted it. Kept for the last 64 collectives a lane entered, and
 * per communicator the latest number (a member past it entered it, when is no longer known). */
int het_arbiter_enter(het_arbiter *a, int lane, double t, long long comm, long long seq);
/* The lane, its clock at t, waits in that collective with the lanes members[0, n) (itself among
 * them or not; entering it then if it did not post it): it resumes once every member is in, so
 * no earlier than any member's entry, nor than the promise of a member not in yet. Keys that
 * two communicators share make a member count as in (a lower promise: safe). */
int het_arbiter_wait_group(het_arbiter *a, int lane, double t, long long comm, long long seq,
                           const int *members, int n);
/* The id of lane's flow number seq (its own count from 0), or -1 if not posted yet. */
int het_arbiter_find(const het_arbiter *a, int lane, int seq);
/* The lane starts no more flows. */
int het_arbiter_leave(het_arbiter *a, int lane);

/* Told, as the network moves, each flow in it (its id) and its rate (bytes/s) from t0 to t1
 * (between two events: final). */
typedef void (*het_arbiter_span_fn)(void *arg, int id, double t0, double t1, double rate);
void het_arbiter_on_span(het_arbiter *a, het_arbiter_span_fn fn, void *arg);
/* Commits every event that no lane can change any more; returns the network's time. */
double het_arbiter_settle(het_arbiter *a);
/* Completion time of flow id, or a negative number while it is not final. */
double het_arbiter_done(const het_arbiter *a, int id);
/* Lane's promise as the last settle computed it (INFINITY: it starts no flow again). */
double het_arbiter_promise(const het_arbiter *a, int lane);
/* The network (counters: bytes and busy time per resource). */
const het_flows *het_arbiter_flows(const het_arbiter *a);

#endif
