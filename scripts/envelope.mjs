#!/usr/bin/env node
// Node reference for the browser view envelope (SPEC.md section 7), the
// counterpart of the Go package envelope. It uses node:crypto the way the
// browser broker does, and is strict where Node's own decoders are lenient
// (Buffer.from ignores bad hex and base64 characters, GCM accepts any IV and
// short tags, computeSecret accepts compressed points), so that it rejects
// exactly what the Go package rejects.
//
//   node scripts/envelope.mjs vectors testdata/envelope
//       (re)writes one test vector file per case into the directory
//   node scripts/envelope.mjs open < {"privateKey":hex,"requestId":hex,"body":{"envelope":{...}}}
//       writes the plaintext to stdout; on failure one line to stderr, exit 1
//   node scripts/envelope.mjs seal < {"publicKey":hex,"requestId":hex,"plaintext":base64}
//       writes the wire body {"envelope":{...}} to stdout

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const LABEL = 'agentfy-browser-view-v1'; // HKDF info, versioned
const CURVE = 'prime256v1';
const KEY_SIZE = 32; // bytes, AES-256 key
const IV_SIZE = 12; // bytes, GCM nonce
const TAG_SIZE = 16; // bytes, GCM tag
const PUBLIC_KEY_SIZE = 65; // bytes, uncompressed SEC1 point
const PRIVATE_KEY_SIZE = 32; // bytes, P-256 scalar
const MAX_PLAINTEXT = 8 << 20; // 8 MiB
const MAX_STDIN = 16 << 20; // 16 MiB, above the base64 of MAX_PLAINTEXT

class OpenError extends Error {}

function lowerHex(s, size, what) {
  if (typeof s !== 'string' || s.length !== 2 * size || !/^[0-9a-f]*$/.test(s)) {
    throw new OpenError(`${what} is not ${size} bytes of lowercase hex`);
  }
  return Buffer.from(s, 'hex');
}

function base64Len(n) {
  return Math.ceil(n / 3) * 4;
}

function strictBase64(s, what) {
  if (typeof s !== 'string' || s.length > base64Len(MAX_PLAINTEXT)) {
    throw new OpenError(`${what} is not a string of at most ${base64Len(MAX_PLAINTEXT)} characters`);
  }
  const b = Buffer.from(s, 'base64');
  // Re-encoding catches every non-canonical form: bad characters, base64url,
  // missing padding, line breaks and non-zero padding bits.
  if (b.toString('base64') !== s) {
    throw new OpenError(`${what} is not canonical padded base64`);
  }
  if (b.length > MAX_PLAINTEXT) {
    throw new OpenError(`${what} is longer than ${MAX_PLAINTEXT} bytes`);
  }
  return b;
}

function checkRequestId(id) {
  if (typeof id !== 'string' || !/^[0-9a-f]{64}$/.test(id)) {
    throw new OpenError('request id is not 64 lowercase hex characters');
  }
}

function deriveKey(secret, salt, info = LABEL) {
  return Buffer.from(crypto.hkdfSync('sha256', secret, Buffer.from(salt, 'utf8'), Buffer.from(info, 'utf8'), KEY_SIZE));
}

function publicPoint(publicKeyHex, what) {
  const point = lowerHex(publicKeyHex, PUBLIC_KEY_SIZE, what);
  if (point[0] !== 0x04) {
    throw new OpenError(`${what} is not an uncompressed point`);
  }
  return point;
}

// sealWith is seal with every binding parameter exposed, so that the vectors
// can break one at a time. Only the vectors pass options.
function sealWith(recipientHex, requestId, plaintext, options = {}) {
  const recipient = publicPoint(recipientHex, 'recipient public key');
  const ecdh = crypto.createECDH(CURVE);
  ecdh.generateKeys();
  const secret = ecdh.computeSecret(recipient);
  const key = deriveKey(secret, options.salt ?? requestId, options.info ?? LABEL);
  const iv = crypto.randomBytes(IV_SIZE);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_SIZE });
  cipher.setAAD(Buffer.from(options.aad ?? requestId, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return {
    envelope: {
      publicKey: ecdh.getPublicKey('hex'),
      iv: iv.toString('hex'),
      tag: cipher.getAuthTag().toString('hex'),
      ciphertext: ciphertext.toString('base64'),
    },
  };
}

function seal(recipientHex, requestId, plaintext) {
  checkRequestId(requestId);
  if (plaintext.length > MAX_PLAINTEXT) {
    throw new Error(`plaintext is ${plaintext.length} bytes, more than ${MAX_PLAINTEXT}`);
  }
  return sealWith(recipientHex, requestId, plaintext);
}

function open(privateKeyHex, requestId, body) {
  checkRequestId(requestId);
  const env = body?.envelope;
  if (typeof env !== 'object' || env === null) {
    throw new OpenError('body has no envelope object');
  }
  const sender = publicPoint(env.publicKey, 'publicKey');
  const iv = lowerHex(env.iv, IV_SIZE, 'iv');
  const tag = lowerHex(env.tag, TAG_SIZE, 'tag');
  const ciphertext = strictBase64(env.ciphertext, 'ciphertext');

  const ecdh = crypto.createECDH(CURVE);
  ecdh.setPrivateKey(lowerHex(privateKeyHex, PRIVATE_KEY_SIZE, 'private key'));
  let secret;
  try {
    secret = ecdh.computeSecret(sender);
  } catch {
    throw new OpenError('publicKey is not on P-256');
  }
  const decipher = crypto.createDecipheriv('aes-256-gcm', deriveKey(secret, requestId), iv, { authTagLength: TAG_SIZE });
  decipher.setAAD(Buffer.from(requestId, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
  } catch {
    throw new OpenError('authentication failed');
  }
}

async function readStdinJSON() {
  const chunks = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += chunk.length;
    if (size > MAX_STDIN) throw new Error(`stdin is longer than ${MAX_STDIN} bytes`);
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

// ---- vectors ----

// Private keys are padded because a scalar may have leading zero bytes.
function newKey() {
  const ecdh = crypto.createECDH(CURVE);
  ecdh.generateKeys();
  return ecdh;
}

function privateHex(ecdh) {
  return ecdh.getPrivateKey('hex').padStart(2 * PRIVATE_KEY_SIZE, '0');
}

function newRequestId() {
  return crypto.randomBytes(32).toString('hex');
}

// fakeJPEG returns n bytes that look like a JPEG: SOI marker first, EOI last.
function fakeJPEG(n) {
  return Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), crypto.randomBytes(n - 6), Buffer.from([0xff, 0xd9])]);
}

function page(jpegSize) {
  return Buffer.from(
    JSON.stringify({
      url: 'https://example.com/account',
      title: 'Account',
      capturedAt: '2026-11-03T12:00:00.000Z',
      contentType: 'image/jpeg',
      data: fakeJPEG(jpegSize).toString('base64'),
    }),
    'utf8',
  );
}

// flipHex flips the low bit of byte i of a hex string (negative i counts from the end).
function flipHex(h, i) {
  const b = Buffer.from(h, 'hex');
  b[(i + b.length) % b.length] ^= 0x01;
  return b.toString('hex');
}

// pageOneMod3 returns a page whose length is 1 modulo 3, padded with JSON
// whitespace, so that its base64 ends in "==".
function pageOneMod3() {
  const p = page(300);
  return Buffer.concat([p, Buffer.from(' '.repeat((4 - (p.length % 3)) % 3))]);
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function vectorCases() {
  const cases = [];
  const add = (name, c) => cases.push({ name, ...c });

  // A fresh recipient, request id and page envelope for each case, so that no
  // two cases share key material by accident.
  const fresh = (plaintext = page(300)) => {
    const recipient = newKey();
    const requestId = newRequestId();
    const body = seal(recipient.getPublicKey('hex'), requestId, plaintext);
    return { recipient, requestId, body, plaintext, env: body.envelope };
  };
  const ok = (name, comment, f, header = 'plaintext') =>
    add(name, {
      expect: 'success',
      comment,
      privateKey: privateHex(f.recipient),
      requestId: f.requestId,
      plaintext: header === 'plaintext' ? f.plaintext : undefined,
      plaintextSHA256: header === 'sha256' ? crypto.createHash('sha256').update(f.plaintext).digest('hex') : undefined,
      body: f.body,
    });
  const bad = (name, comment, f, changes = {}) =>
    add(name, {
      expect: 'open failure',
      comment,
      privateKey: changes.privateKey ?? privateHex(f.recipient),
      requestId: changes.requestId ?? f.requestId,
      body: changes.body ?? { envelope: { ...f.env, ...changes.env } },
    });

  ok('open_ok_page', 'a page with a JPEG frame opens', fresh());
  ok('open_ok_null', 'the page null (no capturable tab) opens', fresh(Buffer.from('null')));
  ok('open_ok_empty', 'an empty plaintext opens; the tag alone authenticates it', fresh(Buffer.alloc(0)), 'sha256');

  // One in 256 secrets and scalars starts with a zero byte; both sides must
  // keep it (fixed 32-byte encodings), so make sure a vector has each.
  for (;;) {
    const f = fresh(Buffer.from('null'));
    const secret = f.recipient.computeSecret(Buffer.from(f.env.publicKey, 'hex'));
    if (secret[0] === 0) {
      ok('open_ok_secret_leading_zero', 'the ECDH secret starts with a zero byte, which stays in the HKDF input', f);
      break;
    }
  }
  for (;;) {
    const recipient = newKey();
    if (!privateHex(recipient).startsWith('00')) continue;
    const requestId = newRequestId();
    const plaintext = page(200);
    ok('open_ok_privatekey_leading_zero', 'the recipient scalar starts with a zero byte', {
      recipient,
      requestId,
      plaintext,
      body: seal(recipient.getPublicKey('hex'), requestId, plaintext),
    }, 'sha256');
    break;
  }

  let f = fresh();
  bad('open_bad_publickey_altered', 'publicKey replaced by another valid point: agreement succeeds, authentication fails', f, {
    env: { publicKey: newKey().getPublicKey('hex') },
  });
  f = fresh();
  bad('open_bad_publickey_offcurve', 'last byte of the y-coordinate flipped: the point is off the curve', f, {
    env: { publicKey: flipHex(f.env.publicKey, -1) },
  });
  f = fresh();
  {
    const compressed = crypto.ECDH.convertKey(f.env.publicKey, CURVE, 'hex', 'hex', 'compressed');
    bad('open_bad_publickey_compressed', 'the same point in compressed form (Node computeSecret would accept it)', f, { env: { publicKey: compressed } });
  }
  f = fresh();
  {
    const hybrid = crypto.ECDH.convertKey(f.env.publicKey, CURVE, 'hex', 'hex', 'hybrid');
    bad('open_bad_publickey_hybrid', 'the same point in hybrid form (06/07 prefix)', f, { env: { publicKey: hybrid } });
  }
  f = fresh();
  bad('open_bad_publickey_short', 'publicKey missing its last byte (64 bytes)', f, { env: { publicKey: f.env.publicKey.slice(0, -2) } });
  f = fresh();
  bad('open_bad_publickey_long', 'publicKey with one extra byte (66 bytes)', f, { env: { publicKey: f.env.publicKey + '00' } });
  f = fresh();
  bad('open_bad_publickey_uppercase', 'the right publicKey in uppercase hex, which Node never emits', f, {
    env: { publicKey: f.env.publicKey.toUpperCase() },
  });
  f = fresh();
  bad('open_bad_publickey_infinity', 'publicKey is the SEC1 encoding of the point at infinity', f, { env: { publicKey: '00' } });
  f = fresh();
  bad('open_bad_publickey_zero', 'publicKey is 04 followed by 64 zero bytes', f, { env: { publicKey: '04' + '00'.repeat(64) } });
  f = fresh();
  bad('open_bad_publickey_empty', 'publicKey is empty', f, { env: { publicKey: '' } });
  f = fresh();
  bad('open_bad_hex_publickey', 'publicKey has a non-hex character', f, { env: { publicKey: f.env.publicKey.slice(0, -1) + 'g' } });

  f = fresh();
  bad('open_bad_iv_altered', 'one bit of the IV flipped', f, { env: { iv: flipHex(f.env.iv, 0) } });
  f = fresh();
  bad('open_bad_iv_short', 'IV missing its last byte (11 bytes)', f, { env: { iv: f.env.iv.slice(0, -2) } });
  f = fresh();
  bad('open_bad_iv_long', 'IV of 16 bytes (GCM would accept it with another nonce derivation)', f, { env: { iv: f.env.iv + '00000000' } });
  f = fresh();
  bad('open_bad_iv_empty', 'IV is empty', f, { env: { iv: '' } });
  f = fresh();
  bad('open_bad_hex_iv', 'IV has non-hex characters', f, { env: { iv: 'zz' + f.env.iv.slice(2) } });
  f = fresh();
  bad('open_bad_hex_iv_odd', 'IV has an odd number of hex digits', f, { env: { iv: f.env.iv.slice(0, -1) } });
  do f = fresh();
  while (!/[a-f]/.test(f.env.iv));
  bad('open_bad_hex_iv_uppercase', 'the right IV in uppercase hex', f, { env: { iv: f.env.iv.toUpperCase() } });

  f = fresh();
  bad('open_bad_tag_altered', 'one bit of the tag flipped', f, { env: { tag: flipHex(f.env.tag, -1) } });
  f = fresh();
  bad('open_bad_tag_truncated', 'tag truncated to 12 bytes (Node would check a short tag unless told its length)', f, {
    env: { tag: f.env.tag.slice(0, 24) },
  });
  f = fresh();
  bad('open_bad_tag_long', 'tag with one extra byte (17 bytes)', f, { env: { tag: f.env.tag + '00' } });
  f = fresh();
  bad('open_bad_tag_empty', 'tag is empty', f, { env: { tag: '' } });
  f = fresh();
  bad('open_bad_hex_tag', 'tag has a non-hex character', f, { env: { tag: f.env.tag.slice(0, -1) + 'x' } });

  f = fresh();
  {
    const ct = Buffer.from(f.env.ciphertext, 'base64');
    ct[0] ^= 0x01;
    bad('open_bad_ciphertext_altered', 'one bit of the first ciphertext byte flipped', f, { env: { ciphertext: ct.toString('base64') } });
  }
  f = fresh();
  {
    const ct = Buffer.from(f.env.ciphertext, 'base64');
    bad('open_bad_ciphertext_truncated', 'ciphertext missing its last byte', f, { env: { ciphertext: ct.subarray(0, -1).toString('base64') } });
  }
  f = fresh();
  {
    const ct = Buffer.from(f.env.ciphertext, 'base64');
    bad('open_bad_ciphertext_extended', 'ciphertext with one extra byte', f, {
      env: { ciphertext: Buffer.concat([ct, Buffer.from([0])]).toString('base64') },
    });
  }
  f = fresh();
  bad('open_bad_ciphertext_empty', 'ciphertext of a non-empty page removed', f, { env: { ciphertext: '' } });
  f = fresh();
  bad('open_bad_ciphertext_swapped', 'IV, tag and ciphertext from another envelope of the same page to the same recipient and request', f, {
    env: { ...seal(f.recipient.getPublicKey('hex'), f.requestId, f.plaintext).envelope, publicKey: f.env.publicKey },
  });

  // These pages leave one byte in the last base64 quantum ("xy==").
  f = fresh(pageOneMod3());
  bad('open_bad_base64_ciphertext', 'ciphertext has a character outside the base64 alphabet', f, {
    env: { ciphertext: '!' + f.env.ciphertext.slice(1) },
  });
  f = fresh(pageOneMod3());
  bad('open_bad_base64_unpadded', 'ciphertext without its = padding', f, { env: { ciphertext: f.env.ciphertext.replace(/=+$/, '') } });
  f = fresh(pageOneMod3());
  {
    let ct = f.env.ciphertext;
    for (let i = 0; !/[+/]/.test(ct) && i < 100; i++) {
      f = fresh(pageOneMod3());
      ct = f.env.ciphertext;
    }
    bad('open_bad_base64_url', 'ciphertext in the base64url alphabet', f, { env: { ciphertext: ct.replaceAll('+', '-').replaceAll('/', '_') } });
  }
  f = fresh(pageOneMod3());
  bad('open_bad_base64_newline', 'ciphertext with a line break, which lenient decoders skip', f, {
    env: { ciphertext: f.env.ciphertext.slice(0, 76) + '\n' + f.env.ciphertext.slice(76) },
  });
  f = fresh(pageOneMod3());
  {
    // "xy==": y carries 2 data bits and 4 padding bits, which must be zero.
    const ct = f.env.ciphertext;
    const y = ct.length - 3;
    const nonzero = B64[B64.indexOf(ct[y]) | 0x01];
    bad('open_bad_base64_padding_bits', 'ciphertext whose padding bits are not zero: decodes to the same bytes', f, {
      env: { ciphertext: ct.slice(0, y) + nonzero + ct.slice(y + 1) },
    });
  }

  f = fresh();
  bad('open_bad_requestid_altered', 'the last digit of the request id changed', f, {
    requestId: f.requestId.slice(0, -1) + (f.requestId.endsWith('0') ? '1' : '0'),
  });
  f = fresh();
  bad('open_bad_requestid_uppercase', 'the right request id in uppercase hex', f, { requestId: f.requestId.toUpperCase() });
  f = fresh();
  bad('open_bad_requestid_short', 'the request id missing its last digit', f, { requestId: f.requestId.slice(0, -1) });
  f = fresh();
  bad('open_bad_requestid_empty', 'an empty request id', f, { requestId: '' });

  {
    const recipient = newKey();
    const requestId = newRequestId();
    const other = newRequestId();
    const plaintext = page(300);
    const body = (options) => sealWith(recipient.getPublicKey('hex'), requestId, plaintext, options);
    const base = { recipient, requestId, plaintext };
    bad('open_bad_aad_mismatch', 'HKDF salt is the request id, but the AAD is another request id', { ...base, env: body({ aad: other }).envelope });
    bad('open_bad_salt_mismatch', 'the AAD is the request id, but the HKDF salt is another request id', { ...base, env: body({ salt: other }).envelope });
    bad('open_bad_label_mismatch', 'sealed with the HKDF info agentfy-browser-view-v0', { ...base, env: body({ info: 'agentfy-browser-view-v0' }).envelope });
  }

  f = fresh();
  bad('open_bad_wrong_recipient', 'opened with another recipient private key', f, { privateKey: privateHex(newKey()) });
  f = fresh();
  {
    const rest = { ...f.env };
    delete rest.tag;
    bad('open_bad_envelope_missing_tag', 'the envelope has no tag field', f, { body: { envelope: rest } });
  }
  return cases;
}

function formatVector(c) {
  const header = [
    ['expect', c.expect],
    ['comment', c.comment],
    ['private key', c.privateKey],
    ['request id', c.requestId],
  ];
  if (c.plaintext !== undefined) header.push(['plaintext', c.plaintext.toString('base64')]);
  if (c.plaintextSHA256 !== undefined) header.push(['plaintext sha256', c.plaintextSHA256]);
  const lines = header.map(([k, v]) => (v === '' ? `${k}:` : `${k}: ${v}`));
  return `${lines.join('\n')}\n\n${JSON.stringify(c.body)}\n`;
}

function writeVectors(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const cases = vectorCases();
  checkVectors(cases);
  const names = new Set(cases.map((c) => c.name));
  if (names.size !== cases.length) throw new Error('duplicate vector name');
  // Remove vectors of cases that no longer exist, and only those.
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith('open_') && !names.has(name)) fs.rmSync(path.join(dir, name));
  }
  for (const c of cases) {
    fs.writeFileSync(path.join(dir, c.name), formatVector(c));
  }
  process.stderr.write(`wrote ${cases.length} vectors to ${dir}\n`);
}

// Self-check: every vector must behave as it says under this file's open.
function checkVectors(cases) {
  for (const c of cases) {
    let got;
    try {
      got = open(c.privateKey, c.requestId, c.body);
    } catch (err) {
      if (!(err instanceof OpenError)) throw err;
      got = null;
    }
    const opened = got !== null;
    if (opened !== (c.expect === 'success')) throw new Error(`vector ${c.name}: open ${opened ? 'succeeded' : 'failed'}`);
  }
}

async function main() {
  const [command, dir] = process.argv.slice(2);
  switch (command) {
    case 'vectors': {
      if (!dir) throw new Error('usage: envelope.mjs vectors DIR');
      writeVectors(dir);
      return;
    }
    case 'open': {
      const input = await readStdinJSON();
      process.stdout.write(open(input.privateKey, input.requestId, input.body));
      return;
    }
    case 'seal': {
      const input = await readStdinJSON();
      const plaintext = Buffer.from(String(input.plaintext), 'base64');
      if (plaintext.toString('base64') !== input.plaintext) throw new Error('plaintext is not canonical padded base64');
      process.stdout.write(JSON.stringify(seal(input.publicKey, input.requestId, plaintext)));
      return;
    }
    default:
      throw new Error('usage: envelope.mjs vectors DIR | open | seal');
  }
}

main().catch((err) => {
  const prefix = err instanceof OpenError ? 'cannot open: ' : '';
  process.stderr.write(`envelope.mjs: ${prefix}${String(err.message).split('\n')[0]}\n`);
  process.exitCode = 1;
});
