"""The shared-memory transport of protocol version 3 (Linux), plugin side.

plugins/proto/cde_strategy.proto describes it: the host keeps the batch's
large arrays in a sealed memfd (the input region, mapped here read-only)
and may offer a second one for per-token answers (the answer region,
mapped read-write); the plugin opens both through /proc/<host pid>/fd/<fd>.
Batch.shm.arrays says where each array lies; a header that does not fit
the region is a BatchError naming the field, which the hook reports as
INVALID_ARGUMENT (as the Go SDK reports a batch DecodeBatch refuses).

Mappings are never closed here: numpy arrays of a batch may still hold
them (mmap.close() would fail, or worse, leave them dangling). A replaced
region's mapping is dropped, and the last array that uses it unmaps it.
"""

import mmap
import os
import re

import numpy as np

#: The first 8 bytes of the Configure probe region.
MAGIC = b"CDESHM01"

_PATH = re.compile(r"^/proc/[0-9]+/fd/[0-9]+$")

# The Batch fields that may lie in the input region: number -> (name,
# element type). Element types are little-endian (the regions hold the
# host's native layout, and the host is little-endian like every Linux
# machine cde runs on).
FIELDS = {
    20: ("prompt", np.dtype("<i4")),
    21: ("response", np.dtype("<i4")),
    30: ("logprobs", np.dtype("<f8")),
    31: ("entropies", np.dtype("<f8")),
    32: ("values", np.dtype("<f8")),
    33: ("advantages", np.dtype("<f8")),
    34: ("advantage_bonus", np.dtype("<f8")),
    35: ("returns", np.dtype("<f8")),
    41: ("embedding", np.dtype("<f8")),
}

# ShmArray.DType values (cde_strategy.proto).
_INT32, _FLOAT64 = 1, 2
_DTYPES = {_INT32: np.dtype("<i4"), _FLOAT64: np.dtype("<f8")}
_DTYPE_NAMES = {0: "DTYPE_UNSPECIFIED", _INT32: "INT32", _FLOAT64: "FLOAT64"}


class BatchError(Exception):
    """A shared-memory batch that cannot be read (a header that lies, a
    region that cannot be mapped): INVALID_ARGUMENT."""


class RegionError(Exception):
    """A region that cannot be opened or mapped."""


def map_region(region, writable=False):
    """Opens and maps region (a pb.ShmRegion): read-only for an input
    region, read-write for an answer region. Raises RegionError with the
    reason."""
    path = region.path
    if not _PATH.match(path):
        raise RegionError("path %r is not /proc/<pid>/fd/<fd>" % (path,))
    size = int(region.size)
    if size <= 0:
        raise RegionError("%s: size %d" % (path, size))
    try:
        fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise RegionError("open %s: %s" % (path, e.strerror or e))
    try:
        st = os.fstat(fd)
        if st.st_size < size:
            raise RegionError("%s has %d bytes, the host announced %d" % (path, st.st_size, size))
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        try:
            # The mapping keeps the memfd alive after os.close.
            return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=prot)
        except (OSError, ValueError) as e:
            raise RegionError("mmap %s (%d bytes, %s): %s" % (path, size, "read-write" if writable else "read-only",
                                                              getattr(e, "strerror", None) or e))
    finally:
        os.close(fd)


def probe(region):
    """Checks the Configure probe region: None when it maps read-only and
    starts with MAGIC, else the reason it cannot be used."""
    try:
        m = map_region(region, writable=False)
    except RegionError as e:
        return str(e)
    if len(m) < len(MAGIC) or m[:len(MAGIC)] != MAGIC:
        return "%s does not start with %r (got %r)" % (region.path, MAGIC, bytes(m[:len(MAGIC)]))
    return None


class Regions:
    """The mapped regions, one per role ("input", "answer"), keyed by
    their ShmRegion id: a new id replaces the role's mapping."""

    def __init__(self):
        self._maps = {}  # role -> ((id, path, size), mmap)

    def get(self, role, region):
        key = (int(region.id), region.path, int(region.size))
        cur = self._maps.get(role)
        if cur is not None and cur[0] == key:
            return cur[1]
        # Drop the old mapping first (numpy arrays still using it keep it
        # alive); a failed map then leaves nothing stale behind.
        self._maps.pop(role, None)
        m = map_region(region, writable=(role == "answer"))
        self._maps[role] = (key, m)
        return m


def expected_counts(msg):
    """The element count each shm-able field must have (as DecodeBatch
    checks the message's)."""
    total = sum(int(t) for t in msg.lengths)
    ptotal = sum(int(t) for t in msg.prompt_lengths)
    k = int(msg.value_heads)
    return {"prompt": ptotal, "response": total, "logprobs": total, "entropies": total, "values": total * k,
            "advantages": total, "advantage_bonus": total, "returns": total,
            "embedding": len(msg.lengths) * int(msg.embedding_dim)}


def input_arrays(msg, regions):
    """The arrays of msg.shm (msg.HasField("shm")) as read-only numpy views
    of the input region: a dict field name -> array. Raises BatchError
    naming the field when a header does not fit."""
    shm = msg.shm
    if not shm.arrays:
        return {}
    if not shm.HasField("input"):
        raise BatchError("shm: %d arrays but no input region" % len(shm.arrays))
    try:
        m = regions.get("input", shm.input)
    except RegionError as e:
        raise BatchError("shm: input region: %s" % e)
    size = int(shm.input.size)
    want = expected_counts(msg)
    out = {}
    seen = set()
    for a in shm.arrays:
        f = int(a.field)
        if f not in FIELDS:
            raise BatchError("shm: field %d is not a Batch field that shared memory carries" % f)
        name, dtype = FIELDS[f]
        what = "shm: %s (field %d)" % (name, f)
        if f in seen:
            raise BatchError("%s: listed twice" % what)
        seen.add(f)
        got = _DTYPES.get(int(a.dtype))
        if got != dtype:
            raise BatchError("%s: element type %s, want %s" % (what, _DTYPE_NAMES.get(int(a.dtype), int(a.dtype)),
                                                              "INT32" if dtype.kind == "i" else "FLOAT64"))
        if len(getattr(msg, name)) != 0:
            raise BatchError("%s: also sent in the message (%d entries)" % (what, len(getattr(msg, name))))
        off, count = int(a.offset), int(a.count)
        if off % 8 != 0:
            raise BatchError("%s: offset %d is not a multiple of 8" % (what, off))
        nbytes = count * dtype.itemsize
        if off + nbytes > size:
            raise BatchError("%s: offset %d + %d bytes exceeds the region's %d bytes" % (what, off, nbytes, size))
        if count != want[name] and count != 0:
            raise BatchError("%s: %d entries, want %d" % (what, count, want[name]))
        if count == 0:
            continue  # absent, as an empty message field
        arr = np.frombuffer(m, dtype=dtype, count=count, offset=off)
        arr.flags.writeable = False
        out[name] = arr
    return out


def answer_view(msg, regions, nbytes):
    """A writable float64 view of the first nbytes of msg.shm.answer, or
    None (then the answer goes in the message) with the reason."""
    if not msg.HasField("shm") or not msg.shm.HasField("answer"):
        return None, None
    region = msg.shm.answer
    if int(region.size) < nbytes:
        return None, "the answer region has %d bytes, the answer %d" % (int(region.size), nbytes)
    try:
        m = regions.get("answer", region)
    except RegionError as e:
        return None, "answer region: %s" % e
    return np.frombuffer(m, dtype=np.dtype("<f8"), count=nbytes // 8, offset=0), None
