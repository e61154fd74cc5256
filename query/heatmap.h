/* heatmap.h - how individual profiles' values spread over time: Grafana's
 * SelectHeatmap (Profiles Drilldown's heatmap view).
 *
 * Every profile the query selects is a point: its time and its total value (from the
 * block footers: no stack is read). In span mode the points are spans instead: each
 * span id a profile's samples carry (segment.h) is a point at the profile's time,
 * valued at the sum of that span's samples; its samples split over several series of
 * one group (by sample labels) still make one point, as Pyroscope counts them. Points
 * are counted in cells of a time step and a value bucket, with Pyroscope's layout so
 * Grafana draws the same picture:
 *   - HEATMAP_BUCKETS equal value buckets from the smallest to the largest value of
 *     the whole answer (all groups share them; bucket i starts at ymin[i], the last
 *     one also holds the largest value);
 *   - time buckets ending at start, start + step, ... up to the end: a point belongs
 *     to the first one that ends at or after its time (the last one past it).
 * Groups are groupby's (one per value tuple of the group-by labels, ranked by total,
 * at most `limit`; the groups past it are left out, not summed). Each group answers
 * its non-empty time buckets only, oldest first, each with every value bucket's
 * count and, when asked, per non-empty cell the point with the largest value (the
 * newest of equals) as its exemplar, labelled with the labels its series share. */
#ifndef HEARTH_HEATMAP_H
#define HEARTH_HEATMAP_H

#include "query/groupby.h"

enum { HEATMAP_BUCKETS = 20 };

typedef struct {
    int64_t end_ns; /* the time bucket's end */
    int32_t counts[HEATMAP_BUCKETS];
    exemplar_t ex[HEATMAP_BUCKETS];   /* set only where the cell has points and exemplars were asked;
                                     * in span mode ex[b].p.span is the span */
    size_t ex_point[HEATMAP_BUCKETS]; /* internal: the point ex[b] came from, while building */
} heatmap_slot_t;

typedef struct {
    heatmap_slot_t *slots; /* non-empty time buckets, oldest first */
    size_t n;
} heatmap_series_t;

typedef struct {
    grouped_t g;         /* the groups: their labels are g.v[i].vals */
    heatmap_series_t *s; /* g.n of them, in g.v's order */
    double ymin[HEATMAP_BUCKETS];
} heatmap_t;

typedef enum { HEATMAP_PROFILES, HEATMAP_SPANS } heatmap_points_t;

/* Builds the heatmap of q (q->from..q->until, step q->step > 0) per group of
 * names[0..width), its points profiles or spans. q->sel is borrowed mutable as
 * groupby_run borrows it. 0, or -1 with err; out is freed by heatmap_destroy either
 * way. */
int heatmap_run(store_t *st, const merge_query_t *q, selector_t *sel, char *const *names, size_t width, size_t limit,
                heatmap_points_t points, int exemplars, heatmap_t *out, hr_err_t *err);
void heatmap_destroy(heatmap_t *h);

#endif
