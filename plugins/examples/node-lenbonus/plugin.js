#!/usr/bin/env node
// lenbonus: an example cde exploration-strategy plugin in JavaScript.
//
// Strategy: a reward bonus scale / (1 + T_i) for a response of T_i tokens
// (shorter responses earn more), metrics mean_length and batches (the
// number of batches observed so far, kept in checkpoints).
//
// Params (the entry's params:): scale, a number > 0, default 1. Any other
// key is an error naming it.
//
// Everything go-plugin's Go SDK does for a Go plugin is written out here,
// section by section, as docs/plugins.md ("Plugins in other languages")
// describes it:
//   1. the magic cookie check and protocol-version negotiation (environment);
//   2. a self-signed TLS certificate for AutoMTLS (X.509 DER, built below
//      with node:crypto only);
//   3. the gRPC server on a Unix socket: the strategy service
//      (cde.strategy.v1.Strategy, from plugins/proto/cde_strategy.proto)
//      plus go-plugin's health, controller (shutdown) and stdio services;
//   4. the handshake line on stdout; logs as JSON lines on stderr.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// --- logging: hclog-style JSON lines on stderr, forwarded by cde-run -----
//
// {"@level": "info", "@message": "...", key: value...}: cde-run logs it at
// that level with the plugin's name (levels: trace, debug, info, warn,
// error; cde-run shows info and above). No @timestamp: go-plugin accepts
// only hclog's layout (6 fractional digits), and cde-run stamps the line.
// A plain text line on stderr is logged too, at info level, and the last
// ones are quoted in the error when the plugin crashes.

function log(level, message, fields = {}) {
  process.stderr.write(JSON.stringify({ '@level': level, '@message': message, ...fields }) + '\n');
}

// --- 1. handshake environment --------------------------------------------

const MAGIC_COOKIE_KEY = 'CDE_STRATEGY_PLUGIN';
const MAGIC_COOKIE_VALUE = 'c0e5e1a7-rlvr-exploration-strategy';
const CORE_PROTOCOL_VERSION = 1; // go-plugin's own protocol
const APP_PROTOCOL_VERSION = 1; // the cde strategy protocol (cde_strategy.proto)

if (process.env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
  process.stderr.write('This program is a cde strategy plugin: cde-run starts it (see docs/plugins.md).\n');
  process.exit(1);
}
const offered = (process.env.PLUGIN_PROTOCOL_VERSIONS || '').split(',').filter((v) => v !== '');
if (!offered.includes(String(APP_PROTOCOL_VERSION))) {
  process.stderr.write(`cde-run offers strategy protocol versions [${offered}], this plugin speaks ${APP_PROTOCOL_VERSION}\n`);
  process.exit(1);
}
const clientCertPEM = process.env.PLUGIN_CLIENT_CERT;
if (!clientCertPEM) {
  process.stderr.write('PLUGIN_CLIENT_CERT is not set: this plugin needs cde-run\'s AutoMTLS\n');
  process.exit(1);
}

// --- 2. a self-signed certificate (X.509 v3, DER) -------------------------
//
// What go-plugin's host checks: the certificate parses, it is valid for the
// DNS name "localhost", and the TLS server proves it holds its key. The
// host trusts exactly this certificate (it is the only root it accepts),
// so it is its own issuer, marked as a CA.

function derLength(n) {
  if (n < 0x80) return Buffer.from([n]);
  const bytes = [];
  for (; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
function tlv(tag, ...parts) {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}
const sequence = (...parts) => tlv(0x30, ...parts);
const set = (...parts) => tlv(0x31, ...parts);
const boolTrue = () => tlv(0x01, Buffer.from([0xff]));
const octets = (b) => tlv(0x04, b);
const explicit = (n, ...parts) => tlv(0xa0 + n, ...parts);
function integer(unsigned) { // a non-negative INTEGER from big-endian bytes
  let b = Buffer.from(unsigned);
  while (b.length > 1 && b[0] === 0) b = b.subarray(1);
  if (b[0] & 0x80) b = Buffer.concat([Buffer.from([0]), b]);
  return tlv(0x02, b);
}
function oid(dotted) {
  const arcs = dotted.split('.').map(Number);
  const out = [40 * arcs[0] + arcs[1]];
  for (const arc of arcs.slice(2)) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) base128.unshift((v & 0x7f) | 0x80);
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}
function time(d) { // UTCTime before 2050, GeneralizedTime from 2050 (RFC 5280)
  const s = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z'; // YYYYMMDDHHMMSSZ
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(s.slice(2))) : tlv(0x18, Buffer.from(s));
}
const extension = (id, critical, value) => sequence(oid(id), ...(critical ? [boolTrue()] : []), octets(value));

function selfSignedCertificate() {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ecdsaWithSHA256 = sequence(oid('1.2.840.10045.4.3.2'));
  const name = sequence(set(sequence(oid('2.5.4.3'), tlv(0x0c, Buffer.from('localhost'))))); // CN=localhost
  const serial = crypto.randomBytes(16);
  serial[0] &= 0x7f;
  const now = Date.now();
  const tbs = sequence(
    explicit(0, integer([2])), // version 3
    integer(serial),
    ecdsaWithSHA256,
    name, // issuer
    sequence(time(new Date(now - 60e3)), time(new Date(now + 365 * 24 * 3600e3))),
    name, // subject
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(
      extension('2.5.29.19', true, sequence(boolTrue())), // basicConstraints: CA
      // keyUsage: digitalSignature (bit 0) and keyCertSign (bit 5): 0x84, 2 unused bits
      extension('2.5.29.15', true, tlv(0x03, Buffer.from([0x02, 0x84]))),
      // extKeyUsage: serverAuth, clientAuth
      extension('2.5.29.37', false, sequence(oid('1.3.6.1.5.5.7.3.1'), oid('1.3.6.1.5.5.7.3.2'))),
      // subjectAltName: dNSName localhost
      extension('2.5.29.17', false, sequence(tlv(0x82, Buffer.from('localhost')))),
    )),
  );
  const signature = crypto.sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value
  const der = sequence(tbs, ecdsaWithSHA256, tlv(0x03, Buffer.from([0]), signature));
  const pem = '-----BEGIN CERTIFICATE-----\n' + der.toString('base64').match(/.{1,64}/g).join('\n') +
    '\n-----END CERTIFICATE-----\n';
  return { der, pem, keyPEM: privateKey.export({ type: 'pkcs8', format: 'pem' }) };
}

// --- the strategy -----------------------------------------------------------

class LenBonus {
  constructor(scale) {
    this.scale = scale;
    this.batches = 0;
  }
  // bonus_i = scale / (1 + T_i)
  rewardBonus(batch) {
    return batch.lengths.map((t) => this.scale / (1 + t));
  }
  observe(batch) {
    this.batches++;
    const n = batch.lengths.length;
    const mean = n === 0 ? 0 : batch.lengths.reduce((a, t) => a + t, 0) / n;
    // Bare names: cde-run logs them as explore/lenbonus/mean_length, ...
    return { mean_length: mean, batches: this.batches };
  }
  saveState() {
    return Buffer.from(JSON.stringify({ batches: this.batches }));
  }
  loadState(data) {
    const s = JSON.parse(data.toString('utf8'));
    if (!Number.isInteger(s.batches) || s.batches < 0) throw new Error(`state: batches = ${s.batches}: want an integer >= 0`);
    this.batches = s.batches;
  }
}

// configure reads params strictly, naming keys as cde-run does
// ("config: strategies[0].params.scale: must be > 0, got -1").
function configure(paramsJSON, paramsPath) {
  const params = paramsJSON ? JSON.parse(paramsJSON) : {};
  const key = (k) => `config: ${paramsPath ? paramsPath + '.' : ''}${k}`;
  for (const k of Object.keys(params)) {
    if (k !== 'scale') throw new Error(`${key(k)}: unknown key (known keys here: scale)`);
  }
  const scale = params.scale === undefined ? 1 : params.scale;
  if (typeof scale !== 'number') throw new Error(`${key('scale')}: want a number, got ${JSON.stringify(scale)}`);
  if (!(scale > 0) || !Number.isFinite(scale)) throw new Error(`${key('scale')}: must be > 0, got ${scale}`);
  return new LenBonus(scale);
}

// --- 3. the gRPC services ---------------------------------------------------

const PROTO = path.join(__dirname, '..', '..', 'proto', 'cde_strategy.proto');
const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO, {
  keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
}));

let strategy = null;
const description = () => ({
  protocol_version: APP_PROTOCOL_VERSION,
  name: 'lenbonus',
  // correct: reads the verifier's verdicts; min_group (with min_group_key,
  // a params key): every group must hold at least that many responses.
  needs: { logprobs: false, entropies: false, pooling: '', value_heads: 0, head_masks: false,
    correct: false, min_group: 0, min_group_key: '' },
  capabilities: { reward_bonus: true, observe: true, state: true },
  sdk: 'cde-node-example/1',
});

// unary wraps a handler: a thrown error becomes the gRPC status code
// (ABORTED: the strategy failed; cde-run names the plugin and the hook).
function unary(fn, code = grpc.status.ABORTED) {
  return (call, callback) => {
    if (strategy === null && fn !== configureHandler) {
      callback({ code: grpc.status.FAILED_PRECONDITION, details: 'not configured yet: call Configure first' });
      return;
    }
    try {
      callback(null, fn(call.request));
    } catch (e) {
      log('error', `lenbonus: ${e.message}`);
      callback({ code, details: e.message });
    }
  };
}
function configureHandler(req) {
  if (strategy !== null) throw new Error('already configured');
  strategy = configure(req.params_json, req.params_path);
  log('info', 'lenbonus configured', { scale: strategy.scale, algorithm: req.algorithm });
  return description();
}

const server = new grpc.Server({
  'grpc.max_receive_message_length': 7 * (1 << 28), // plugins/protocol.go MaxMessageSize
  'grpc.max_send_message_length': 7 * (1 << 28),
});
server.addService(pkg.cde.strategy.v1.Strategy.service, {
  Configure: (call, callback) => {
    try {
      callback(null, configureHandler(call.request));
    } catch (e) { // a params error: INVALID_ARGUMENT, reported as written
      callback({ code: grpc.status.INVALID_ARGUMENT, details: e.message });
    }
  },
  Describe: unary(() => description()),
  RewardBonus: unary((batch) => ({ bonus: strategy.rewardBonus(batch) })),
  Observe: unary((batch) => ({ metrics: strategy.observe(batch) })),
  SaveState: unary(() => ({ data: strategy.saveState() })),
  LoadState: unary((st) => { strategy.loadState(st.data); return {}; }),
  // AdvantageBonus, LossTerms, HeadMasks: not declared; grpc-js answers
  // UNIMPLEMENTED (cde-run never calls them).
});

// go-plugin's services, by hand: their messages are tiny, so the wire
// bytes are written out instead of loading go-plugin's .proto files.
const raw = (servicePath, responseBytes, stream = false) => ({
  path: servicePath, requestStream: false, responseStream: stream,
  requestSerialize: () => Buffer.alloc(0), requestDeserialize: (b) => b,
  responseSerialize: () => responseBytes, responseDeserialize: (b) => b,
});
// grpc.health.v1.Health/Check -> HealthCheckResponse{status: SERVING (1)}:
// field 1, varint -> bytes 0x08 0x01. go-plugin pings service "plugin".
server.addService({ Check: raw('/grpc.health.v1.Health/Check', Buffer.from([0x08, 0x01])) }, {
  Check: (call, callback) => callback(null, {}),
});
// plugin.GRPCController/Shutdown(Empty) -> Empty: cde-run closing the plugin.
server.addService({ Shutdown: raw('/plugin.GRPCController/Shutdown', Buffer.alloc(0)) }, {
  Shutdown: (call, callback) => {
    callback(null, {});
    setImmediate(() => { server.forceShutdown(); process.exit(0); });
  },
});
// plugin.GRPCStdio/StreamStdio: go-plugin forwards a Go plugin's os.Stdout
// and os.Stderr over this stream; this plugin writes its logs to stderr
// directly, so the stream stays open and sends nothing (without the
// service, cde-run logs a warning that stdio syncing is unavailable).
const stdioStreams = [];
server.addService({ StreamStdio: raw('/plugin.GRPCStdio/StreamStdio', Buffer.alloc(0), true) }, {
  StreamStdio: (call) => { stdioStreams.push(call); },
});
// (plugin.GRPCBroker, for plugins that call back into the host, is not
// served: cde-run does not use it, and go-plugin ignores its absence.)

// --- 4. listen, then print the handshake line --------------------------------

const cert = selfSignedCertificate();
const credentials = grpc.ServerCredentials.createSsl(
  Buffer.from(clientCertPEM), // the only client certificate accepted: cde-run's
  [{ cert_chain: Buffer.from(cert.pem), private_key: Buffer.from(cert.keyPEM) }],
  true, // require and verify the client certificate
);
const socketDir = fs.mkdtempSync(path.join(process.env.PLUGIN_UNIX_SOCKET_DIR || os.tmpdir(), 'lenbonus-'));
const socket = path.join(socketDir, 'plugin.sock');
process.on('exit', () => fs.rmSync(socketDir, { recursive: true, force: true }));

server.bindAsync('unix://' + socket, credentials, (err) => {
  if (err) {
    log('error', `lenbonus: cannot listen on ${socket}: ${err.message}`);
    process.exit(1);
  }
  // CORE-PROTOCOL-VERSION|APP-PROTOCOL-VERSION|NETWORK|ADDRESS|PROTOCOL|CERT
  // CERT: the server certificate's DER, base64 without padding.
  const certB64 = cert.der.toString('base64').replace(/=+$/, '');
  process.stdout.write(`${CORE_PROTOCOL_VERSION}|${APP_PROTOCOL_VERSION}|unix|${socket}|grpc|${certB64}\n`);
});
