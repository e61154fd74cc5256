/* catalog.h - what is stored: series, profile types, label names and values.
 *
 * Backs the discovery endpoints (series, profile types, labels, label values).
 * Without a time range every series of the tenant counts; with one, only series
 * that have a profile in the range (found by scanning profile rows, not samples).
 * The single-profile list reads the same rows. */
#ifndef HEARTH_CATALOG_H
#define HEARTH_CATALOG_H

#include <stdint.h>

#include "query/selector.h"
#include "storage/store.h"

/* fn is called under the index lock for each selected series. sel may be NULL. */
int catalog_series(store_t *st, const char *tenant, const selector_t *sel, int ranged, int64_t from, int64_t until,
                   index_series_fn fn, void *ctx, hr_err_t *err);

/* One stored profile: its series, time and total value. */
typedef struct {
    uint32_t series;
    int64_t time_ns, total;
} catalog_profile_t;

/* Lists the profiles of the series selected by sel (which must name a profile
 * type) in [from, until], newest first. *out is malloc'd (caller frees), *n its
 * length. Profiles of one series at the same instant are listed once, summed, as a
 * merge would see them. */
int catalog_profiles(store_t *st, const char *tenant, const selector_t *sel, int64_t from, int64_t until,
                     catalog_profile_t **out, size_t *n, hr_err_t *err);

#endif
