/**
 * Payload encryption: an AES-256-GCM {@link PayloadCodec} for the worker's and the clients' data converters, so
 * Temporal's histories (workflow inputs, activity arguments, results, memos, summaries, failure messages) hold
 * ciphertext, never a payment-method token or a provider's error text in plain text. The key id travels in each payload's metadata: rotation is a new key first in
 * `PAYLOAD_KEYS` (it encrypts from then on) with the old ones kept after it (they still decrypt). A payload without
 * our encoding (histories recorded before encryption, a client without the codec) passes through unchanged.
 *
 * No I/O but `node:crypto`; never imported by workflow code (the codec runs outside the workflow sandbox).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';

/** `metadata.encoding` of an encrypted payload. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
/** `metadata` entry naming the key that encrypted the payload. */
export const KEY_ID_METADATA = 'encryption-key-id';
/** `metadata` entry naming the cipher, so a later codec can tell formats apart. */
export const CIPHER_METADATA = 'encryption-cipher';
const CIPHER = 'AES-256-GCM';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** One key: its id (in every payload it encrypted) and 32 secret bytes. */
export interface PayloadKey {
  readonly id: string;
  readonly key: Buffer;
}

/** The key ring: the first key encrypts, every key decrypts. */
export interface PayloadKeys {
  readonly current: PayloadKey;
  readonly all: ReadonlyMap<string, Buffer>;
}

/** A `PAYLOAD_KEYS` value that does not parse; the message names what is wrong, never a key. */
export class PayloadKeysError extends Error {
  override readonly name = 'PayloadKeysError';
}

const keyIdPattern = /^[A-Za-z0-9._-]{1,64}$/;

/** Parses `kid1:base64key,kid0:base64key` (the first one is current); each key is 32 bytes, ids are unique. */
export function parsePayloadKeys(value: string): PayloadKeys {
  const entries = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length === 0) throw new PayloadKeysError('no key: expected kid:base64key[,kid:base64key...]');
  const all = new Map<string, Buffer>();
  const ordered: PayloadKey[] = [];
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const id = colon < 0 ? '' : entry.slice(0, colon);
    const encoded = colon < 0 ? '' : entry.slice(colon + 1);
    if (!keyIdPattern.test(id))
      throw new PayloadKeysError(`entry ${i + 1}: the key id must be 1-64 of [A-Za-z0-9._-] before a ':'`);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded))
      throw new PayloadKeysError(`key ${id}: the key must be base64 after the ':'`);
    const key = Buffer.from(encoded, 'base64');
    if (key.length !== KEY_BYTES)
      throw new PayloadKeysError(`key ${id}: ${key.length} bytes, AES-256 needs ${KEY_BYTES} (base64 of 32 bytes)`);
    if (all.has(id)) throw new PayloadKeysError(`key ${id}: listed twice`);
    all.set(id, key);
    ordered.push({ id, key });
  }
  return { current: ordered[0] as PayloadKey, all };
}

const utf8 = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null | undefined) => (b ? new TextDecoder().decode(b) : undefined);

/**
 * The inner payload as bytes: metadata and data, length-prefixed (no protobuf dependency). Format: u32 count, then
 * per entry u32 name length, name, u32 value length, value; then the data.
 */
function frame(p: Payload): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const meta = Object.entries(p.metadata ?? {}).filter((e): e is [string, Uint8Array] => e[1] != null);
  parts.push(u32(meta.length));
  for (const [name, value] of meta) {
    const n = Buffer.from(name, 'utf8');
    parts.push(u32(n.length), n, u32(value.length), Buffer.from(value));
  }
  parts.push(Buffer.from(p.data ?? new Uint8Array()));
  return Buffer.concat(parts);
}

function unframe(b: Buffer): Payload {
  let at = 0;
  const u32 = () => {
    if (at + 4 > b.length) throw new Error('truncated payload frame');
    const n = b.readUInt32BE(at);
    at += 4;
    return n;
  };
  const take = (n: number) => {
    if (at + n > b.length) throw new Error('truncated payload frame');
    const s = b.subarray(at, at + n);
    at += n;
    return s;
  };
  const metadata: Record<string, Uint8Array> = {};
  const count = u32();
  for (let i = 0; i < count; i++) {
    const name = take(u32()).toString('utf8');
    metadata[name] = new Uint8Array(take(u32()));
  }
  return { metadata, data: new Uint8Array(b.subarray(at)) };
}

/** AES-256-GCM over each whole payload (metadata included), the key id bound in as associated data. */
export class AesGcmPayloadCodec implements PayloadCodec {
  constructor(private readonly keys: PayloadKeys) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const { id, key } = this.keys.current;
    return payloads.map((p) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(id, 'utf8'));
      const sealed = Buffer.concat([cipher.update(frame(p)), cipher.final()]);
      return {
        metadata: {
          encoding: utf8(ENCRYPTED_ENCODING),
          [KEY_ID_METADATA]: utf8(id),
          [CIPHER_METADATA]: utf8(CIPHER),
        },
        data: new Uint8Array(Buffer.concat([iv, sealed, cipher.getAuthTag()])),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => {
      // Not ours (recorded before encryption, or from a client without the codec): unchanged.
      if (text(p.metadata?.encoding) !== ENCRYPTED_ENCODING) return p;
      const id = text(p.metadata?.[KEY_ID_METADATA]) ?? '';
      const key = this.keys.all.get(id);
      if (!key) throw new PayloadKeysError(`payload encrypted with key "${id}", which is not in PAYLOAD_KEYS`);
      const data = Buffer.from(p.data ?? new Uint8Array());
      if (data.length < IV_BYTES + TAG_BYTES) throw new PayloadKeysError('encrypted payload too short');
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(id, 'utf8'));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)),
        decipher.final(),
      ]);
      return unframe(plain);
    });
  }
}

/**
 * The module the worker, its workflow bundle (`bundleWorkflowCode({ failureConverterPath })`) and every client load the
 * failure converter from: messages and stack traces encoded, so the codec encrypts them (./failure-converter.ts).
 */
export const failureConverterPath: string = require.resolve('./failure-converter');

/** The data converter the worker and every client use: encryption of every payload, failure texts included. */
export function encryptingDataConverter(codec: PayloadCodec): DataConverter {
  return { payloadCodecs: [codec], failureConverterPath };
}

/** A fresh random key in `PAYLOAD_KEYS` form, e.g. for `npm run` one-liners and tests. */
export function newPayloadKey(id: string): string {
  return `${id}:${randomBytes(KEY_BYTES).toString('base64')}`;
}
