/* catalog.h - what is stored: series, profile types, label names and values.
 *
 * Backs the discovery endpoints (series, profile types, labels, label values).
 * Without a time range every series of the tenant counts; with one, only series
 * that have a profile in the range (found by scanning profile rows, not samples). */
#ifndef HEARTH_CATALOG_H
#define HEARTH_CATALOG_H

#include <stdint.h>

#include "query/selector.h"
#include "storage/store.h"

/* fn is called under the index lock for each selected series. sel may be NULL. */
int catalog_series(store_t *st, const char *tenant, const selector_t *sel, int ranged, int64_t from, int64_t until,
                   index_series_fn fn, void *ctx, hr_err_t *err);

#endif
