/* unit.h - a minimal test harness: CHECK macros that count and report, and the
 * list of test functions main.c runs. Exits non-zero when anything failed and ends
 * with the line "N passed, N failed". */
#ifndef HEARTH_UNIT_H
#define HEARTH_UNIT_H

#include <stdio.h>
#include <string.h>

typedef struct {
    int passed, failed;
    const char *testdata; /* ../shared/testdata */
    char tmpdir[256];     /* a fresh directory per run */
} unit_t;

extern unit_t U;

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (c) U.passed++;                                                                                             \
        else {                                                                                                         \
            U.failed++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                               \
        }                                                                                                              \
    } while (0)

#define CHECK_INT(a, b)                                                                                                \
    do {                                                                                                               \
        long long _a = (long long)(a), _b = (long long)(b);                                                            \
        if (_a == _b) U.passed++;                                                                                      \
        else {                                                                                                         \
            U.failed++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s == %lld, want %lld\n", __FILE__, __LINE__, #a, _a, _b);                    \
        }                                                                                                              \
    } while (0)

#define CHECK_STR(a, b)                                                                                                \
    do {                                                                                                               \
        const char *_a = (a), *_b = (b);                                                                               \
        if (_a && _b && !strcmp(_a, _b)) U.passed++;                                                                   \
        else {                                                                                                         \
            U.failed++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: %s == \"%s\", want \"%s\"\n", __FILE__, __LINE__, #a, _a ? _a : "(null)",     \
                    _b ? _b : "(null)");                                                                               \
        }                                                                                                              \
    } while (0)

/* Reads a test file under U.testdata into a malloc'd buffer (exits if missing). */
unsigned char *unit_read(const char *rel, size_t *n);
/* A fresh empty directory under U.tmpdir. */
void unit_tmpdir(const char *name, char *out, size_t n);
/* Removes a directory and everything in it. */
void unit_rmtree(const char *dir);
/* Removes U.tmpdir, reports the checks and, last, "suite: N passed, N failed" (tests
 * or paths); returns the exit code (1 when any check failed). */
int unit_finish(const char *suite, int ok, int bad);

/* The test functions, one per behaviour. */
// clang-format off: one test per line
#define UNIT_TESTS(X)                                                                                                  \
    X(test_varint_roundtrip)                                                                                           \
    X(test_u64map_any_key)                                                                                             \
    X(test_sort_u32)                                                                                                   \
    X(test_buf_decimal)                                                                                                \
    X(test_timeparse)                                                                                                  \
    X(test_jsonw)                                                                                                      \
    X(test_labels_intersect)                                                                                           \
    X(test_symtab_dedup)                                                                                               \
    X(test_symtab_roundtrip)                                                                                           \
    X(test_symtab_fingerprints)                                                                                        \
    X(test_symtab_import)                                                                                              \
    X(test_symdict_shares_stacks)                                                                                      \
    X(test_symdict_maps_the_stacks_samples_name)                                                                       \
    X(test_block_stack_fingerprints_defer_symbols)                                                                     \
    X(test_functab_sums_per_series)                                                                                    \
    X(test_functab_names_by_fingerprint)                                                                               \
    X(test_block_roundtrip)                                                                                            \
    X(test_block_corruption)                                                                                           \
    X(test_block_empty_stack_and_verify)                                                                               \
    X(test_block_span_samples)                                                                                         \
    X(test_block_value_units)                                                                                          \
    X(test_block_partitions)                                                                                           \
    X(test_block_writer)                                                                                               \
    X(test_block_summaries)                                                                                            \
    X(test_block_window_reads)                                                                                         \
    X(test_wal_replay)                                                                                                 \
    X(test_wal_replay_stop)                                                                                            \
    X(test_wal_torn_tail)                                                                                              \
    X(test_wal_zeros_ahead)                                                                                            \
    X(test_wal_corrupt_middle)                                                                                         \
    X(test_store_cut_and_reopen)                                                                                       \
    X(test_failed_cut_keeps_its_frozen_heads)                                                                          \
    X(test_ingest_cut_and_scan_at_once)                                                                                \
    X(test_retention)                                                                                                  \
    X(test_segment_merge)                                                                                              \
    X(test_store_compaction)                                                                                           \
    X(test_appname)                                                                                                    \
    X(test_folded)                                                                                                     \
    X(test_pprof_census_and_budget)                                                                                    \
    X(test_pprof_totals)                                                                                               \
    X(test_pprof_twice_no_new_symbols)                                                                                 \
    X(test_pprof_negative)                                                                                             \
    X(test_pprof_labels_split_series)                                                                                  \
    X(test_request_roundtrip)                                                                                          \
    X(test_selector)                                                                                                   \
    X(test_selector_string_escapes)                                                                                    \
    X(test_short_type_names)                                                                                           \
    X(test_selector_regex)                                                                                             \
    X(test_catalog_unlocked_and_deadline)                                                                              \
    X(test_flamebearer_layout)                                                                                         \
    X(test_callsite_prefixes)                                                                                          \
    X(test_stackfilter_focus_and_ignore)                                                                               \
    X(test_groupby_ranks_and_sums_other)                                                                               \
    X(test_top_and_folded)                                                                                             \
    X(test_renderers_svg_pyrotree_lines_sandwich)                                                                      \
    X(test_max_nodes)                                                                                                  \
    X(test_tree_from_dictionaries)                                                                                     \
    X(test_split_and_share)                                                                                            \
    X(test_diff_layout)                                                                                                \
    X(test_gauge_average)                                                                                              \
    X(test_pprof_output)                                                                                               \
    X(test_base64)                                                                                                     \
    X(test_pbjson)                                                                                                     \
    X(test_otlp_json)                                                                                                  \
    X(test_delta)                                                                                                      \
    X(test_block_types)                                                                                                \
    X(test_pprof_keep_types)                                                                                           \
    X(test_negative_gauges_dropped)                                                                                    \
    X(test_render_table)                                                                                               \
    X(test_catalog_answers)                                                                                            \
    X(test_request_labels)                                                                                             \
    X(test_symbolize_dwarf_inlines)                                                                                    \
    X(test_symbolize_pclntab)                                                                                          \
    X(test_symbolize_cache_persists)                                                                                   \
    X(test_symbolize_rewrite)                                                                                          \
    X(test_objstore_encodings)                                                                                         \
    X(test_azblob_signing_and_listing)                                                                                 \
    X(test_objstore_open)                                                                                              \
    X(test_objstore_retries)                                                                                           \
    X(test_workers_run_jobs_at_once_up_to_the_cap)                                                                     \
    X(test_linger_drains_and_closes)                                                                                   \
    X(test_relabel_rules_as_prometheus_applies_them)                                                                   \
    X(test_grpc_timeouts_and_status_codes)                                                                             \
    X(test_auth_file_and_headers)                                                                                      \
    X(test_config_flags_env_and_errors)                                                                                \
    X(test_arena_zeroed_aligned_and_large)
// clang-format on

#define DECLARE(name) void name(void);
UNIT_TESTS(DECLARE)
#undef DECLARE

#endif
