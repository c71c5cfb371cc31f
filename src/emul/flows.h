/* Flows that share links (emul/flows.c): the bandwidth-sharing core of a network model in which
 * links get busy, as SimGrid's flow model computes it.
 *
 * A network is a set of resources, each with a capacity in bytes/s: a NIC's way out or in, a
 * node's uplink, a backbone, a node-local path. A flow is a transfer of `bytes` over a route (a
 * list of resources): it starts at `start`, spends its latency first (no bandwidth), then moves
 * its bytes at a rate that the flows active at that moment share max-min fairly (progressive
 * filling: the most constrained resource divides its capacity equally among its flows, those
 * flows are fixed at that rate, the rest share what is left), bounded by the flow's own rate
 * bound if it has one (SimGrid's flows are bounded by their route's slowest link, and by TCP's
 * window over the round trip). Rates change only at events (a flow's latency ends or its last byte
 * arrives), so completion times are exact up to floating point.
 *
 * Two ways to use it:
 * - offline: add every flow, then het_flows_run; each flow's completion is final;
 * - online (an arbiter that learns of flows as ranks start them): het_flows_advance(f, t) moves
 *   the network to time t (no flow added later may start before t), completing what ends by t;
 *   het_flows_next(f) is the earliest time an event can happen among the flows known, final once
 *   every rank's clock has passed it (a conservative discrete-event rule).
 * Deterministic: the same flows added in the same order give the same times bit for bit. */
#ifndef HET_EMUL_FLOWS_H
#define HET_EMUL_FLOWS_H

#include <stddef.h>

enum { HET_FLOW_ROUTE_MAX = 8 };

typedef struct het_flows het_flows;

/* A network of n resources of the given capacities (bytes/s, > 0; copied). NULL on failure
 * (out of memory, or a capacity not > 0: the message says which). */
het_flows *het_flows_new(int n, const double *capacity);
void het_flows_free(het_flows *f);

/* Adds a flow; returns its id (0, 1, ...) or a negative status: a route of 0 or more than
 * HET_FLOW_ROUTE_MAX resources, a resource out of range, bytes or latency negative or not finite,
 * a start before the time the network was advanced to. rate_bound: bytes/s (0: none). */
int het_flows_add(het_flows *f, double start, double bytes, double latency, double rate_bound,
                  const int *route, int n_route);

/* The same with SimGrid's refinements of a flow: it moves its bytes at rate x factor (the
 * bandwidth factor of its message size, SMPI's piecewise bw-factor), and a unit of its rate
 * takes weight[k] of resource route[k] (1 on its route; SimGrid's cross-traffic adds the back
 * route at 0.05, for the acknowledgements). weight NULL: all 1. */
int het_flows_add_weighted(het_flows *f, double start, double bytes, double latency,
                           double rate_bound, double factor, const int *route,
                           const double *weight, int n_route);

/* The checks of het_flows_add_weighted without adding: HET_OK, or HET_EINVAL saying what is
 * wrong (a user that keeps flows before adding them, emul/arbiter.c, refuses them at once). */
int het_flows_check(const het_flows *f, double start, double bytes, double latency,
                    double rate_bound, double factor, const int *route, const double *weight,
                    int n_route);

/* Moves the network to time t (>= its present time), completing the flows that end by t. */
void het_flows_advance(het_flows *f, double t);
/* The earliest event among the flows known (a latency ending, a flow completing at its present
 * rate), or INFINITY when none is pending. */
double het_flows_next(het_flows *f);
/* Sets the network's time back to t while no flow is live (the clock of its user started over;
 * completed flows keep their times). HET_EINVAL while a flow is live. */
int het_flows_rewind(het_flows *f, double t);
/* Runs every flow known to completion. */
void het_flows_run(het_flows *f);

/* The rate flow id takes of its resources now (bytes/s of capacity; its bytes move at rate x
 * factor), 0 while it waits out its latency or once complete. */
double het_flows_rate(het_flows *f, int id);
/* Completion time of flow id, or a negative number while it is not complete. */
double het_flows_done(const het_flows *f, int id);
/* Bytes each resource carried so far, and the time it was busy (carrying any flow), for the
 * "no link carries more than its bandwidth" counters. */
double het_flows_resource_bytes(const het_flows *f, int r);
double het_flows_resource_busy_s(const het_flows *f, int r);
double het_flows_now(const het_flows *f);

#endif
