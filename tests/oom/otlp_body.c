/* otlp_body.c - see otlp_body.h.
 *
 * The conversion the integration tests make in Python (tests/integration/test_otlp.py),
 * in C over protobuf-c: the pprof's tables become the dictionary (each with its null
 * entry at 0), its sample labels attributes, its sample types one Profile each. */
#include "tests/oom/otlp_body.h"

#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "wire/gzip.h"
#include "wire/otlp_profiles.pb-c.h"
#include "wire/profile.pb-c.h"

typedef Perftools__Profiles__Profile pprof_t;

static size_t pos_of(uint64_t id, uint64_t (*id_at)(const pprof_t *, size_t), const pprof_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (id_at(p, i) == id) return i + 1; /* after the null entry */
    return 0;
}
static uint64_t map_id(const pprof_t *p, size_t i) { return p->mapping[i]->id; }
static uint64_t loc_id(const pprof_t *p, size_t i) { return p->location[i]->id; }
static uint64_t fn_id(const pprof_t *p, size_t i) { return p->function[i]->id; }

#define NEW(a, T, init) memcpy(arena_alloc(a, sizeof(T)), &(T)init, sizeof(T))
#define ARRAY(a, T, n) ((T *)arena_alloc(a, ((n) ? (n) : 1) * sizeof(T)))

/* The attribute (key string index, string value), added to the table unless there. */
static int32_t attr_of(arena_t *a, Otlp__ProfilesDictionary *d, int32_t key, const char *value) {
    for (size_t i = 0; i < d->n_attribute_table; i++)
        if (d->attribute_table[i]->key_strindex == key && !strcmp(d->attribute_table[i]->value->string_value, value))
            return (int32_t)i;
    Otlp__AnyValue *v = NEW(a, Otlp__AnyValue, OTLP__ANY_VALUE__INIT);
    v->value_case = OTLP__ANY_VALUE__VALUE_STRING_VALUE;
    v->string_value = (char *)value;
    Otlp__KeyValueAndUnit *kv = NEW(a, Otlp__KeyValueAndUnit, OTLP__KEY_VALUE_AND_UNIT__INIT);
    kv->key_strindex = key, kv->value = v;
    d->attribute_table[d->n_attribute_table] = kv;
    return (int32_t)d->n_attribute_table++;
}

static void dictionary(arena_t *a, const pprof_t *p, Otlp__ProfilesDictionary *d, const char *build_id) {
    size_t nlabels = 0;
    for (size_t i = 0; i < p->n_sample; i++) nlabels += p->sample[i]->n_label;
    d->n_string_table = p->n_string_table + 1;
    d->string_table = ARRAY(a, char *, d->n_string_table);
    memcpy(d->string_table, p->string_table, p->n_string_table * sizeof *d->string_table);
    int32_t bid_key = (int32_t)p->n_string_table;
    d->string_table[bid_key] = "process.executable.build_id.gnu";
    d->attribute_table = ARRAY(a, Otlp__KeyValueAndUnit *, nlabels + 1);
    d->n_mapping_table = p->n_mapping + 1;
    d->mapping_table = ARRAY(a, Otlp__Mapping *, d->n_mapping_table);
    d->mapping_table[0] = NEW(a, Otlp__Mapping, OTLP__MAPPING__INIT);
    for (size_t i = 0; i < p->n_mapping; i++) {
        Otlp__Mapping *m = d->mapping_table[i + 1] = NEW(a, Otlp__Mapping, OTLP__MAPPING__INIT);
        m->memory_start = p->mapping[i]->memory_start, m->memory_limit = p->mapping[i]->memory_limit;
        m->file_offset = p->mapping[i]->file_offset, m->filename_strindex = (int32_t)p->mapping[i]->filename;
        m->n_attribute_indices = 1;
        m->attribute_indices = ARRAY(a, int32_t, 1);
        m->attribute_indices[0] = attr_of(a, d, bid_key, build_id);
    }
    d->n_function_table = p->n_function + 1;
    d->function_table = ARRAY(a, Otlp__Function *, d->n_function_table);
    d->function_table[0] = NEW(a, Otlp__Function, OTLP__FUNCTION__INIT);
    for (size_t i = 0; i < p->n_function; i++) {
        Otlp__Function *f = d->function_table[i + 1] = NEW(a, Otlp__Function, OTLP__FUNCTION__INIT);
        f->name_strindex = (int32_t)p->function[i]->name,
        f->system_name_strindex = (int32_t)p->function[i]->system_name;
        f->filename_strindex = (int32_t)p->function[i]->filename, f->start_line = p->function[i]->start_line;
    }
    d->n_location_table = p->n_location + 1;
    d->location_table = ARRAY(a, Otlp__Location *, d->n_location_table);
    d->location_table[0] = NEW(a, Otlp__Location, OTLP__LOCATION__INIT);
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *pl = p->location[i];
        Otlp__Location *l = d->location_table[i + 1] = NEW(a, Otlp__Location, OTLP__LOCATION__INIT);
        l->mapping_index = (int32_t)pos_of(pl->mapping_id, map_id, p, p->n_mapping);
        l->address = pl->address;
        l->n_lines = pl->n_line;
        l->lines = ARRAY(a, Otlp__Line *, pl->n_line);
        for (size_t k = 0; k < pl->n_line; k++) {
            l->lines[k] = NEW(a, Otlp__Line, OTLP__LINE__INIT);
            l->lines[k]->function_index = (int32_t)pos_of(pl->line[k]->function_id, fn_id, p, p->n_function);
            l->lines[k]->line = pl->line[k]->line;
        }
    }
    d->n_stack_table = p->n_sample + 1; /* stack i + 1: sample i's */
    d->stack_table = ARRAY(a, Otlp__Stack *, d->n_stack_table);
    d->stack_table[0] = NEW(a, Otlp__Stack, OTLP__STACK__INIT);
    for (size_t i = 0; i < p->n_sample; i++) {
        Otlp__Stack *s = d->stack_table[i + 1] = NEW(a, Otlp__Stack, OTLP__STACK__INIT);
        s->n_location_indices = p->sample[i]->n_location_id;
        s->location_indices = ARRAY(a, int32_t, s->n_location_indices);
        for (size_t k = 0; k < s->n_location_indices; k++)
            s->location_indices[k] = (int32_t)pos_of(p->sample[i]->location_id[k], loc_id, p, p->n_location);
    }
}

static Otlp__Profile *profile(arena_t *a, const pprof_t *p, Otlp__ProfilesDictionary *d, size_t t, int64_t time_ns) {
    Otlp__Profile *o = NEW(a, Otlp__Profile, OTLP__PROFILE__INIT);
    o->sample_type = NEW(a, Otlp__ValueType, OTLP__VALUE_TYPE__INIT);
    o->sample_type->type_strindex = (int32_t)p->sample_type[t]->type;
    o->sample_type->unit_strindex = (int32_t)p->sample_type[t]->unit;
    if (p->period_type) {
        o->period_type = NEW(a, Otlp__ValueType, OTLP__VALUE_TYPE__INIT);
        o->period_type->type_strindex = (int32_t)p->period_type->type;
        o->period_type->unit_strindex = (int32_t)p->period_type->unit;
    }
    o->period = p->period, o->time_unix_nano = (uint64_t)time_ns, o->duration_nano = (uint64_t)p->duration_nanos;
    o->n_samples = p->n_sample;
    o->samples = ARRAY(a, Otlp__Sample *, p->n_sample);
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *ps = p->sample[i];
        Otlp__Sample *s = o->samples[i] = NEW(a, Otlp__Sample, OTLP__SAMPLE__INIT);
        s->stack_index = (int32_t)i + 1;
        s->n_values = 1;
        s->values = &ps->value[t];
        s->attribute_indices = ARRAY(a, int32_t, ps->n_label);
        for (size_t k = 0; k < ps->n_label; k++)
            if (ps->label[k]->str)
                s->attribute_indices[s->n_attribute_indices++] =
                    attr_of(a, d, (int32_t)ps->label[k]->key, p->string_table[ps->label[k]->str]);
    }
    return o;
}

unsigned char *otlp_body_of_pprof(const unsigned char *gz, size_t n, const char *service, const char *build_id,
                                  int64_t time_ns, size_t *len) {
    uint8_t *raw;
    size_t rawlen;
    if (gz_inflate(gz, n, 64 << 20, &raw, &rawlen, NULL)) return NULL;
    pprof_t *p = perftools__profiles__profile__unpack(NULL, rawlen, raw);
    free(raw);
    arena_t *a = arena_new();
    if (!p || !a) return NULL;
    Otlp__ProfilesDictionary d = OTLP__PROFILES_DICTIONARY__INIT;
    dictionary(a, p, &d, build_id);
    Otlp__AnyValue sv = OTLP__ANY_VALUE__INIT;
    sv.value_case = OTLP__ANY_VALUE__VALUE_STRING_VALUE, sv.string_value = (char *)service;
    Otlp__KeyValue kv = OTLP__KEY_VALUE__INIT, *kvs[] = {&kv};
    kv.key = "service.name", kv.value = &sv;
    Otlp__Resource res = OTLP__RESOURCE__INIT;
    res.n_attributes = 1, res.attributes = kvs;
    Otlp__ScopeProfiles sp = OTLP__SCOPE_PROFILES__INIT, *sps[] = {&sp};
    sp.n_profiles = p->n_sample_type;
    sp.profiles = ARRAY(a, Otlp__Profile *, p->n_sample_type);
    for (size_t t = 0; t < p->n_sample_type; t++) sp.profiles[t] = profile(a, p, &d, t, time_ns);
    Otlp__ResourceProfiles rp = OTLP__RESOURCE_PROFILES__INIT, *rps[] = {&rp};
    rp.resource = &res, rp.n_scope_profiles = 1, rp.scope_profiles = sps;
    Otlp__ExportProfilesServiceRequest req = OTLP__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    req.n_resource_profiles = 1, req.resource_profiles = rps, req.dictionary = &d;
    *len = otlp__export_profiles_service_request__get_packed_size(&req);
    unsigned char *out = malloc(*len);
    if (out) otlp__export_profiles_service_request__pack(&req, out);
    arena_free(a);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return out;
}
