"""A self-signed TLS certificate for go-plugin's AutoMTLS, in pure Python.

What cde-run (go-plugin's host) checks of the plugin's certificate: it
parses, it is valid for the DNS name "localhost", and the TLS server proves
it holds its key. The host trusts exactly this certificate (it is the only
root it accepts), so the certificate is its own issuer, marked as a CA.

The key is ECDSA on P-256 with SHA-256, done here with Python integers
(FIPS 186-4 and SEC 1), so the SDK needs nothing beyond grpcio and
protobuf. The signature is made once per plugin start.
"""

import base64
import datetime
import hashlib
import secrets

# P-256 (secp256r1), SEC 2 section 2.4.2.
_P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_A = _P - 3
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)


def _jacobian_double(p):
    x, y, z = p
    if y == 0:
        return (0, 0, 0)
    yy = y * y % _P
    s = 4 * x * yy % _P
    m = (3 * x * x + _A * pow(z, 4, _P)) % _P
    x3 = (m * m - 2 * s) % _P
    y3 = (m * (s - x3) - 8 * yy * yy) % _P
    z3 = 2 * y * z % _P
    return (x3, y3, z3)


def _jacobian_add(p, q):
    if p[2] == 0:
        return q
    if q[2] == 0:
        return p
    x1, y1, z1 = p
    x2, y2, z2 = q
    z1z1, z2z2 = z1 * z1 % _P, z2 * z2 % _P
    u1, u2 = x1 * z2z2 % _P, x2 * z1z1 % _P
    s1, s2 = y1 * z2 * z2z2 % _P, y2 * z1 * z1z1 % _P
    if u1 == u2:
        return _jacobian_double(p) if s1 == s2 else (0, 0, 0)
    h, r = (u2 - u1) % _P, (s2 - s1) % _P
    hh = h * h % _P
    hhh = h * hh % _P
    v = u1 * hh % _P
    x3 = (r * r - hhh - 2 * v) % _P
    y3 = (r * (v - x3) - s1 * hhh) % _P
    z3 = h * z1 * z2 % _P
    return (x3, y3, z3)


def _multiply(k, point=_G):
    """k * point in affine coordinates (double-and-add)."""
    acc = (0, 0, 0)
    add = (point[0], point[1], 1)
    while k:
        if k & 1:
            acc = _jacobian_add(acc, add)
        add = _jacobian_double(add)
        k >>= 1
    x, y, z = acc
    zi = pow(z, -1, _P)
    return (x * zi * zi % _P, y * zi * zi * zi % _P)


def _sign(d, message):
    """An ECDSA signature of message with private key d: (r, s)."""
    z = int.from_bytes(hashlib.sha256(message).digest(), "big")
    while True:
        k = secrets.randbelow(_N - 1) + 1
        r = _multiply(k)[0] % _N
        if r == 0:
            continue
        s = pow(k, -1, _N) * (z + r * d) % _N
        if s != 0:
            return r, s


# --- DER -------------------------------------------------------------------


def _length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _tlv(tag, *parts):
    body = b"".join(parts)
    return bytes([tag]) + _length(len(body)) + body


def _seq(*parts):
    return _tlv(0x30, *parts)


def _int(v):
    b = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
    if b[0] & 0x80:
        b = b"\x00" + b
    return _tlv(0x02, b)


def _oid(dotted):
    arcs = [int(a) for a in dotted.split(".")]
    out = [40 * arcs[0] + arcs[1]]
    for arc in arcs[2:]:
        enc = [arc & 0x7F]
        arc >>= 7
        while arc:
            enc.insert(0, (arc & 0x7F) | 0x80)
            arc >>= 7
        out.extend(enc)
    return _tlv(0x06, bytes(out))


def _time(t):
    # UTCTime before 2050, GeneralizedTime from 2050 (RFC 5280 4.1.2.5).
    if t.year < 2050:
        return _tlv(0x17, t.strftime("%y%m%d%H%M%SZ").encode())
    return _tlv(0x18, t.strftime("%Y%m%d%H%M%SZ").encode())


def _ext(oid, critical, value):
    parts = [_oid(oid)]
    if critical:
        parts.append(_tlv(0x01, b"\xff"))
    parts.append(_tlv(0x04, value))
    return _seq(*parts)


def _pem(label, der):
    b64 = base64.b64encode(der).decode()
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    return ("-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label, "\n".join(lines), label)).encode()


def self_signed_certificate():
    """A fresh key and self-signed certificate for "localhost".

    Returns (certificate DER, certificate PEM, private key PEM), the key in
    SEC 1 form ("EC PRIVATE KEY").
    """
    d = secrets.randbelow(_N - 1) + 1
    qx, qy = _multiply(d)
    point = b"\x04" + qx.to_bytes(32, "big") + qy.to_bytes(32, "big")
    p256 = _oid("1.2.840.10045.3.1.7")
    spki = _seq(_seq(_oid("1.2.840.10045.2.1"), p256), _tlv(0x03, b"\x00" + point))
    ecdsa_sha256 = _seq(_oid("1.2.840.10045.4.3.2"))
    name = _seq(_tlv(0x31, _seq(_oid("2.5.4.3"), _tlv(0x0C, b"localhost"))))  # CN=localhost
    serial = secrets.randbits(127) | 1
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    validity = _seq(_time(now - datetime.timedelta(minutes=1)), _time(now + datetime.timedelta(days=365)))
    extensions = _tlv(
        0xA3,
        _seq(
            _ext("2.5.29.19", True, _seq(_tlv(0x01, b"\xff"))),  # basicConstraints: CA
            # keyUsage: digitalSignature (bit 0) and keyCertSign (bit 5)
            _ext("2.5.29.15", True, _tlv(0x03, b"\x02\x84")),
            # extKeyUsage: serverAuth, clientAuth
            _ext("2.5.29.37", False, _seq(_oid("1.3.6.1.5.5.7.3.1"), _oid("1.3.6.1.5.5.7.3.2"))),
            # subjectAltName: dNSName localhost
            _ext("2.5.29.17", False, _seq(_tlv(0x82, b"localhost"))),
        ),
    )
    tbs = _seq(_tlv(0xA0, _int(2)), _int(serial), ecdsa_sha256, name, validity, name, spki, extensions)
    r, s = _sign(d, tbs)
    der = _seq(tbs, ecdsa_sha256, _tlv(0x03, b"\x00" + _seq(_int(r), _int(s))))
    key = _seq(_int(1), _tlv(0x04, d.to_bytes(32, "big")), _tlv(0xA0, p256), _tlv(0xA1, _tlv(0x03, b"\x00" + point)))
    return der, _pem("CERTIFICATE", der), _pem("EC PRIVATE KEY", key)
