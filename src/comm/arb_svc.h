/* The arbiter service (comm/arb_svc.c): world rank 0 holds the arbiter (emul/arbiter.c) of the
 * messages between nodes; every rank reports to it over a dup of the world, and learns from it
 * when the messages it waits for end (issue #36).
 *
 * Each rank is one lane. A message between nodes is a flow over the sender's node's way out
 * and the receiver's node's way in (with network/crosstraffic: HET_NETEM_BACK of its rate on
 * the back route too), of the model's latency and bandwidth factors for its size; a flow is
 * named by its sender's world rank and the sender's own count (`seq`), which the message's
 * header can carry. A rank reports when it posts a flow, runs at a clock, waits (for flows by
 * name: not posted yet, the wait holds back no more than their sender's promise plus the
 * lookahead) or waits inside a collective, and leaves; rank 0 settles the arbiter whenever it
 * serves and tells each waiting rank the ends of the flows it waits for once they are final.
 * Rank 0 serves from het_arb_svc_serve, which every wait of the service calls while it polls;
 * a rank that waits elsewhere must call it too (on rank 0 nothing moves otherwise). */
#ifndef HET_COMM_ARB_SVC_H
#define HET_COMM_ARB_SVC_H

#include <mpi.h>
#include <stddef.h>

#include "hetrain/emul.h"

typedef struct het_arb_svc het_arb_svc;
/* A message as its receiver names it: its sender (world rank), stream, index (from 0; < 0: any
 * message of the sender that the arbiter does not carry, inside the node: a hold, never
 * answered). */
typedef struct het_arb_name { int src, stream, k; } het_arb_name;
/* What else a wait polls (a header that came names a message to wait for): *stop = 1 ends the
 * wait (its answers come later); HET_OK or an error that ends it too. */
typedef int (*het_arb_poll)(void *arg, int *stop);

/* Collective over world: node[r] is world rank r's node; ne the network between nodes (its
 * bandwidth the capacity of each node's way out and way in; 0: refused). Every rank runs at 0.
 * NULL on failure (the message says why; the others fail too). */
het_arb_svc *het_arb_svc_open(MPI_Comm world, const int *node, het_netem ne);
/* Collective: this rank leaves; rank 0 serves until every rank has left. Frees s. */
int het_arb_svc_close(het_arb_svc *s);

/* This rank starts a message of `bytes` to world rank dest (on another node) on `stream` (0 ..
 * 65535) at `start` (its clock, not before what it reported last); *k its index there. fixed >=
 * 0: a message the arbiter does not carry (inside the node, or without a payload), which
 * arrives `fixed` seconds after its start whatever else moves; it is named and waited for like
 * the others, so a receiver names every message it may get (dest then on any node). */
int het_arb_svc_post(het_arb_svc *s, double start, size_t bytes, int dest, int stream,
                     double fixed, int *k);
/* The same, with its envelope's time (a header's time on its path: a receive from any sender
 * that waits for it takes the first envelope; 0 for het_arb_svc_post). */
int het_arb_svc_post_env(het_arb_svc *s, double start, size_t bytes, int dest, int stream,
                         double fixed, double env, int *k);
/* This rank runs at clock t: it starts no message before t. */
int het_arb_svc_run(het_arb_svc *s, double t);
/* This rank, its clock at t, waits until one of the messages name[0, n) to it ends, or until
 * `until` (INFINITY: no limit; a message inside the node arrives then): *which (-1: the limit
 * came first, nothing named can end by then) and *end, final. `look`: the least time from a
 * message's start to its end, for the ones not posted yet. Serves while it polls, and calls
 * poll(arg) (NULL: none) between: stopped, *which is -2. Of answers that come together it
 * takes the smallest (end, name), the limit before a message that ends at the same time. */
int het_arb_svc_wait(het_arb_svc *s, double t, int n, const het_arb_name *name, double look,
                     double until, het_arb_poll poll, void *arg, int *which, double *end);
/* The two halves of a wait, for a caller that polls itself: the report (*number names its time
 * limit's answer; every call reports, replacing this rank's previous wait), and a look at the
 * answers that came (het_arb_svc_serve takes them): 1 and *which, *end (taken) as above, or 0.
 * An answer told to an earlier wait of the same names counts (its end is final), unless it is
 * past `until`. */
int het_arb_svc_wait_post(het_arb_svc *s, double t, int n, const het_arb_name *name,
                          double look, double until, int *number);
int het_arb_svc_wait_test(het_arb_svc *s, int n, const het_arb_name *name, double until,
                          int number, int *which, double *end);
/* This rank posts collective number `seq` of communicator `comm` (a key its members give
 * alike) at its clock t; and waits in it (members: the world ranks of the communicator's
 * members); both report only: the caller waits for the collective, serving. */
int het_arb_svc_enter(het_arb_svc *s, double t, long long comm, long long seq);
int het_arb_svc_group(het_arb_svc *s, double t, long long comm, long long seq, int n,
                      const int *members);
/* Rendezvous (arb_rdv.c; the model's rndv_bytes > 0: messages of that size wait for their
 * receive). This rank posts a receive on `stream` from world rank src (-1: any) at its clock t:
 * *r its number on the stream (from 0); receive r took message *name (NULL: none that waits,
 * e.g. every sender done); and the wait of a receive from any sender, whose match the arbiter
 * decides: names its candidates (each sender's next message on the stream), recv its number
 * (a time limit as het_arb_svc_wait_post's); the first answer is the message it takes. */
int het_arb_svc_recv(het_arb_svc *s, double t, int stream, int src, int *r);
int het_arb_svc_match(het_arb_svc *s, int stream, int r, const het_arb_name *name);
int het_arb_svc_wait_recv(het_arb_svc *s, double t, int n, const het_arb_name *name,
                          double look, int recv, double until, int *number);
/* Rank 0 (elsewhere a no-op): fn is told, as the network moves, each message's load on the way
 * out of node `out` and into node `in` (its rate / the bandwidth) from t0 to t1, and its
 * cross-traffic's on the way back (the link counter: comm/links.c). */
typedef void (*het_arb_span_fn)(void *arg, int out, int in, double t0, double t1, double load);
void het_arb_svc_on_span(het_arb_svc *s, het_arb_span_fn fn, void *arg);
/* Progress: rank 0 takes the reports that came, settles, answers; the others take answers. */
int het_arb_svc_serve(het_arb_svc *s);
/* The least latency of a message between nodes (a lookahead for het_arb_svc_wait). */
double het_arb_svc_min_latency(const het_arb_svc *s);

#endif
