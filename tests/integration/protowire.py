"""Protobuf's wire format by hand: enough to build the messages the tests send (pprof, push,
querier requests) and to read the ones Hearth answers, field number by field number.

Written out rather than generated from the .proto files so that a test states the exact bytes
it sends, and reads an answer without trusting a schema Hearth could share a bug with.
"""


def pb_put_varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_encode_field(num, wt, v):
    """One protobuf field: v is an int for wire type 0, raw bytes otherwise."""
    tag = pb_put_varint(num << 3 | wt)
    if wt == 0:
        return tag + pb_put_varint(v)
    if wt == 2:
        return tag + pb_put_varint(len(v)) + v
    return tag + v


def pb_field(num, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return pb_encode_field(num, 2, payload)


def pb_uvarint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def pb_fields(b):
    """Yields (field number, wire type, value) of a message: ints for varints, raw bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = pb_uvarint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = pb_uvarint(b, i)
        elif wt == 2:
            n, i = pb_uvarint(b, i)
            v, i = b[i:i + n], i + n
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wt} in field {num}")
        yield num, wt, v


def pb_decode(b):
    """A protobuf message as {field number: [values]}."""
    out = {}
    for num, _, v in pb_fields(b):
        out.setdefault(num, []).append(v)
    return out


def pb_packed(b):
    """The int64 values of a packed repeated varint field."""
    vals, i = [], 0
    while i < len(b):
        v, i = pb_uvarint(b, i)
        vals.append(v - (1 << 64) if v >= 1 << 63 else v)
    return vals


def pb_strs(m, num):
    """The string values of field num of a decoded message."""
    return [v.decode() for v in m.get(num, [])]


def push_request_proto(series):
    """push.v1.PushRequest from [(labels dict, [raw pprof bytes])]."""
    out = b""
    for labels, raws in series:
        body = b"".join(pb_field(1, pb_field(1, k.encode()) + pb_field(2, v.encode())) for k, v in labels.items())
        body += b"".join(pb_field(2, pb_field(1, raw) + pb_field(2, b"id-%d" % i)) for i, raw in enumerate(raws))
        out += pb_field(1, body)
    return out
