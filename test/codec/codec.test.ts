import { defaultPayloadConverter } from '@temporalio/common';
import {
  AesGcmPayloadCodec,
  ENCRYPTED_ENCODING,
  KEY_ID_METADATA,
  PayloadKeysError,
  newPayloadKey,
  parsePayloadKeys,
} from '../../src/codec';

const k0 = newPayloadKey('k0');
const k1 = newPayloadKey('k1');
const input = { request: { paymentMethod: 'pm_card_visa', orderId: 'order-1' } };
const text = (b: Uint8Array | null | undefined) => new TextDecoder().decode(b ?? new Uint8Array());

describe('AesGcmPayloadCodec', () => {
  const codec = new AesGcmPayloadCodec(parsePayloadKeys(`${k1},${k0}`));

  it('encrypts the whole payload: no plain text, the key id and encoding in the metadata', async () => {
    const plain = defaultPayloadConverter.toPayload(input);
    const [sealed] = await codec.encode([plain]);
    expect(text(sealed?.metadata?.encoding)).toBe(ENCRYPTED_ENCODING);
    expect(text(sealed?.metadata?.[KEY_ID_METADATA])).toBe('k1');
    expect(Buffer.from(sealed?.data ?? []).includes('pm_')).toBe(false);
    expect(Buffer.from(sealed?.data ?? []).includes('json/plain')).toBe(false);
    const [opened] = await codec.decode([sealed!]);
    expect(defaultPayloadConverter.fromPayload(opened!)).toEqual(input);
    expect(text(opened?.metadata?.encoding)).toBe('json/plain');
  });

  it('rotates: payloads of the old key still decrypt, new ones use the first key', async () => {
    const old = new AesGcmPayloadCodec(parsePayloadKeys(k0));
    const [byOld] = await old.encode([defaultPayloadConverter.toPayload(input)]);
    expect(text(byOld?.metadata?.[KEY_ID_METADATA])).toBe('k0');
    const [opened] = await codec.decode([byOld!]);
    expect(defaultPayloadConverter.fromPayload(opened!)).toEqual(input);
    // ...and a codec that dropped k0 can no longer read them: it says which key is missing.
    await expect(new AesGcmPayloadCodec(parsePayloadKeys(k1)).decode([byOld!])).rejects.toThrow(/"k0"/);
  });

  it('passes payloads without its encoding through (histories recorded before encryption)', async () => {
    const plain = defaultPayloadConverter.toPayload(input);
    await expect(codec.decode([plain])).resolves.toEqual([plain]);
  });

  it('refuses a tampered payload or a swapped key id (GCM tag, key id as associated data)', async () => {
    const [sealed] = await codec.encode([defaultPayloadConverter.toPayload(input)]);
    const flipped = Buffer.from(sealed!.data!);
    flipped[20] = (flipped[20] ?? 0) ^ 1;
    await expect(codec.decode([{ ...sealed!, data: flipped }])).rejects.toThrow();
    const relabelled = { ...sealed!, metadata: { ...sealed!.metadata, [KEY_ID_METADATA]: Buffer.from('k0') } };
    await expect(codec.decode([relabelled])).rejects.toThrow();
  });

  it('encrypts every payload with a fresh IV', async () => {
    const p = defaultPayloadConverter.toPayload(input);
    const [a, b] = await codec.encode([p, p]);
    expect(Buffer.from(a!.data!).equals(Buffer.from(b!.data!))).toBe(false);
  });
});

describe('parsePayloadKeys', () => {
  it('takes the first key as current and keeps all for decryption', () => {
    const keys = parsePayloadKeys(`${k1}, ${k0}`);
    expect(keys.current.id).toBe('k1');
    expect([...keys.all.keys()]).toEqual(['k1', 'k0']);
  });

  it.each([
    ['', /no key/],
    ['k1', /key id/],
    [`k1:${Buffer.alloc(16).toString('base64')}`, /16 bytes/],
    ['k1:not base64!', /base64/],
    [`${k1},${k1}`, /twice/],
  ])('refuses entry %#, naming the problem, never the key', (value, message) => {
    expect(() => parsePayloadKeys(value)).toThrow(PayloadKeysError);
    expect(() => parsePayloadKeys(value)).toThrow(message);
    const secret = value.split(',')[0]?.split(':')[1];
    if (secret) expect(() => parsePayloadKeys(value)).not.toThrow(secret);
  });
});
