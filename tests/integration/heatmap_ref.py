"""SelectHeatmap's expected answers: Pyroscope's heatmap layout (pkg/model/heatmap) computed
in Python from profile or span points, and the request and answer in binary proto with
upstream's field numbers, written out here rather than taken from wire/querier.proto."""
import struct

from protowire import pb_decode, pb_encode_field, pb_field, pb_packed, pb_strs


def expected_heatmap(rows, start_ms, end_ms, step_ms, key):
    """SelectHeatmap's answer computed from /api/v1/profiles rows with Pyroscope's layout
    (pkg/model/heatmap): 20 equal value buckets over all totals, time buckets ending at
    start + k*step (a profile in the first ending at or after it), per non-empty cell the
    largest profile. {key(row): {slot ms: (counts, {bucket: best row})}}, and the bucket starts."""
    lo, hi = min(r["total"] for r in rows), max(r["total"] for r in rows)
    hi = hi if hi > lo else lo + 1
    size = (hi - lo) / 20
    los = [lo + int(i * size) for i in range(20)]
    his = los[1:] + [hi]
    ntb = (end_ms - start_ms) // step_ms + 1
    out = {}
    for r in sorted(rows, key=lambda r: -r["timestamp"]):  # newest first: the newest of equals stays
        d = r["timestamp"] - start_ms
        tb = min(0 if d <= 0 else -(-d // step_ms), ntb - 1)
        b = next((i for i in range(20) if los[i] <= r["total"] < his[i]), 19)
        counts, best = out.setdefault(key(r), {}).setdefault(start_ms + tb * step_ms, ([0] * 20, {}))
        counts[b] += 1
        if b not in best or r["total"] > best[b]["total"]:
            best[b] = r
    return out, los


HEATMAP_ENUMS = {"HEATMAP_QUERY_TYPE_INDIVIDUAL": 1, "HEATMAP_QUERY_TYPE_SPAN": 2, "EXEMPLAR_TYPE_NONE": 1,
                 "EXEMPLAR_TYPE_INDIVIDUAL": 2, "EXEMPLAR_TYPE_SPAN": 3}


def heatmap_request_proto(doc):
    """A SelectHeatmap JSON request in binary, with upstream's querier.v1 field numbers (as
    Pyroscope's generated querier.pb.go tags them), written out here rather than taken from
    wire/querier.proto."""
    b = (pb_field(1, doc["profileTypeID"].encode()) + pb_field(2, doc["labelSelector"].encode()) +
         pb_encode_field(3, 0, doc["start"]) + pb_encode_field(4, 0, doc["end"]) +
         pb_encode_field(5, 1, struct.pack("<d", doc["step"])))
    b += b"".join(pb_field(6, g.encode()) for g in doc.get("groupBy", []))
    b += pb_encode_field(7, 0, HEATMAP_ENUMS[doc["queryType"]]) + pb_encode_field(8, 0, HEATMAP_ENUMS[doc["exemplarType"]])
    return b + (pb_encode_field(9, 0, doc["limit"]) if "limit" in doc else b"")


def heatmap_norm_json(js):
    """A SelectHeatmap JSON answer as plain tuples, to compare with the binary one."""
    labels = lambda ls: tuple((l["name"], l["value"]) for l in ls or [])
    return [(labels(s.get("labels")),
             [(int(sl["timestamp"]), [float(v) for v in sl["yMin"]], [int(c) for c in sl["counts"]],
               [(int(e["timestamp"]), e.get("profileId", ""), e.get("spanId", ""), int(e["value"]), labels(e.get("labels")))
                for e in sl.get("exemplars", [])]) for sl in s["slots"]]) for s in js.get("series", [])]


def heatmap_norm_proto(raw):
    """A binary SelectHeatmapResponse read with upstream's numbers: series 1; types.v1.HeatmapSeries
    labels 1, slots 2; HeatmapSlot timestamp 1, y_min 2 (packed doubles), counts 3 (packed),
    exemplars 4; Exemplar timestamp 1, profile_id 2, span_id 3, value 4, labels 5."""
    labels = lambda m, n: tuple((pb_strs(l, 1)[0], (pb_strs(l, 2) or [""])[0]) for l in map(pb_decode, m.get(n, [])))
    first = lambda m, n, d: m.get(n, [d])[0]
    out = []
    for s in map(pb_decode, pb_decode(raw).get(1, [])):
        slots = []
        for sl in map(pb_decode, s.get(2, [])):
            ymin = b"".join(sl.get(2, []))
            exs = [(first(e, 1, 0), first(e, 2, b"").decode(), first(e, 3, b"").decode(), first(e, 4, 0), labels(e, 5))
                   for e in map(pb_decode, sl.get(4, []))]
            slots.append((first(sl, 1, 0), list(struct.unpack("<%dd" % (len(ymin) // 8), ymin)),
                          [c for p in sl.get(3, []) for c in pb_packed(p)], exs))
        out.append((labels(s, 1), slots))
    return out
