#!/usr/bin/env python3
"""An independent reader of TensorBoard event files, for cde's tests: the
TFRecord framing (with its masked CRC-32C, computed here from the
polynomial) and the few protobuf fields of tensorflow.Event and
tensorflow.Summary that scalars use, decoded from the wire format by hand,
and the tensors with plugin metadata of the text and hparams plugins
(tensorflow.SummaryMetadata, TensorProto, and the hparams plugin's
HParamsPluginData with its SessionStartInfo, whose hparams map holds
google.protobuf.Value entries). It shares no code with cde's Go writer
(internal/tensorboard).

Usage: read_events.py FILE. Prints one JSON object per record:
{"offset": BYTE, "wall_time": W, "step": S, "file_version": V} or with
"scalars": {TAG: VALUE} and, for tensor values, "tensors": {TAG: {"plugin":
NAME, "data_class": N, "dtype": N, "shape": [DIMS], "strings": [TEXT],
"floats": [F], and for plugin hparams "hparams_version": N,
"hparams": {KEY: VALUE}, "start_time_secs": T, "group_name": G}}; a float
that is not finite is the string "nan", "inf" or "-inf". Exits 1 with a
message on any damage.
"""
import json
import math
import struct
import sys


def _crc32c_table():
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of a message: value is an
    int for varints, bytes for length-delimited fields, bytes of 8 or 4 for
    the fixed widths."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def jsonable(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def packed_floats(v, wt):
    if wt == 5:
        return [struct.unpack("<f", v)[0]]
    return [struct.unpack("<f", v[i:i + 4])[0] for i in range(0, len(v), 4)]


def pb_value(buf):
    """google.protobuf.Value: the kinds as JSON values."""
    out = None
    for num, wt, v in fields(buf):
        if num == 1 and wt == 0:
            out = None
        elif num == 2 and wt == 1:
            out = jsonable(struct.unpack("<d", v)[0])
        elif num == 3 and wt == 2:
            out = v.decode()
        elif num == 4 and wt == 0:
            out = bool(v)
        else:
            raise ValueError("google.protobuf.Value field %d" % num)
    return out


def hparams_content(buf, out):
    out["hparams_version"] = 0
    for num, wt, v in fields(buf):
        if num == 1 and wt == 0:
            out["hparams_version"] = v
        elif num == 3 and wt == 2:  # session_start_info
            hp = {}
            for snum, swt, sv in fields(v):
                if snum == 1 and swt == 2:  # map entry: key 1, value 2
                    key, val = None, None
                    for enum_, ewt, ev in fields(sv):
                        if enum_ == 1 and ewt == 2:
                            key = ev.decode()
                        elif enum_ == 2 and ewt == 2:
                            val = pb_value(ev)
                    if key in hp:
                        raise ValueError("hparam %r twice" % key)
                    hp[key] = val
                elif snum == 4 and swt == 2:
                    out["group_name"] = sv.decode()
                elif snum == 5 and swt == 1:
                    out["start_time_secs"] = struct.unpack("<d", sv)[0]
            out["hparams"] = hp
        elif num in (2, 4):
            out["hparams_other"] = num


def tensor_value(meta, tensor):
    out = {"plugin": None, "data_class": 0, "dtype": 0, "shape": [], "strings": [], "floats": []}
    content = b""
    for num, wt, v in fields(meta or b""):
        if num == 1 and wt == 2:
            for pnum, pwt, pv in fields(v):
                if pnum == 1 and pwt == 2:
                    out["plugin"] = pv.decode()
                elif pnum == 2 and pwt == 2:
                    content = pv
        elif num == 4 and wt == 0:
            out["data_class"] = v
    for num, wt, v in fields(tensor or b""):
        if num == 1 and wt == 0:
            out["dtype"] = v
        elif num == 2 and wt == 2:
            for dnum, dwt, dv in fields(v):
                if dnum == 2 and dwt == 2:
                    size = 0
                    for znum, zwt, zv in fields(dv):
                        if znum == 1 and zwt == 0:
                            size = zv
                    out["shape"].append(size)
        elif num == 5:
            out["floats"] += [jsonable(f) for f in packed_floats(v, wt)]
        elif num == 8 and wt == 2:
            out["strings"].append(v.decode())
    if out["plugin"] == "hparams":
        hparams_content(content, out)
    elif out["plugin"] == "text":
        out["text_version"] = 0
        for num, wt, v in fields(content):
            if num == 1 and wt == 0:
                out["text_version"] = v
    return out


def event(buf):
    out = {"wall_time": 0.0, "step": 0}
    for num, wt, v in fields(buf):
        if num == 1 and wt == 1:
            out["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wt == 0:
            out["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wt == 2:
            out["file_version"] = v.decode()
        elif num == 5 and wt == 2:
            scalars, tensors = {}, {}
            for snum, swt, sv in fields(v):
                if snum != 1 or swt != 2:
                    continue
                tag, value, meta, tensor = None, None, None, None
                for vnum, vwt, vv in fields(sv):
                    if vnum == 1 and vwt == 2:
                        tag = vv.decode()
                    elif vnum == 2 and vwt == 5:
                        value = struct.unpack("<f", vv)[0]
                    elif vnum == 9 and vwt == 2:
                        meta = vv
                    elif vnum == 8 and vwt == 2:
                        tensor = vv
                if tag is None or (value is None) == (tensor is None):
                    raise ValueError("a summary value without tag, or not one of simple_value and tensor")
                if tensor is not None:
                    tensors[tag] = tensor_value(meta, tensor)
                else:
                    scalars[tag] = jsonable(value)
            if scalars or not tensors:
                out["scalars"] = scalars
            if tensors:
                out["tensors"] = tensors
    return out


def main(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            sys.exit("%s: torn record header at byte %d" % (path, i))
        head = data[i:i + 8]
        if masked(head) != struct.unpack("<I", data[i + 8:i + 12])[0]:
            sys.exit("%s: length CRC mismatch at byte %d" % (path, i))
        n = struct.unpack("<Q", head)[0]
        body = data[i + 12:i + 12 + n]
        if len(body) != n or i + 16 + n > len(data):
            sys.exit("%s: torn record at byte %d" % (path, i))
        if masked(body) != struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0]:
            sys.exit("%s: data CRC mismatch at byte %d" % (path, i))
        e = event(body)
        e["offset"] = i
        print(json.dumps(e))
        i += 16 + n


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: read_events.py FILE")
    main(sys.argv[1])
