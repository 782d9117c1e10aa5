/**
 * End to end: the web UI that `npm start` serves decodes payloads through the API's codec endpoint without holding any
 * credential that can resolve a review or move money. Its settings (readable by anyone who reaches the UI, at
 * `/api/v1/settings`) and every process's arguments hold no token; the codec endpoint decodes for the UI's origin; an
 * operator route refuses whatever the UI holds. No browser needed: the UI's own settings say what it would send.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { AesGcmPayloadCodec, parsePayloadKeys } from '../../src/codec';
import { developmentDefaults } from '../../src/config';
import { HOST, Stack, descendants, npmStartEnvironment } from '../helpers/npm-start';

const START_TIMEOUT_MS = 120_000;
const [merchantId, merchantToken] = developmentDefaults.API_TOKENS.split(':') as [string, string];
const [, operatorToken] = developmentDefaults.OPERATOR_TOKENS.split(':') as [string, string];

/** Every string anywhere in a JSON value (keys and values). */
function strings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [k, ...strings(v)]);
  return [];
}

describe('npm start: the web UI decodes without a credential that can resolve (end to end)', () => {
  let tmp: string;
  let stack: Stack | undefined;
  let passed = false;

  beforeAll(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-e2e-codec-'));
  });

  afterAll(async () => {
    if (stack) {
      if (!passed) console.error(`[e2e] npm start output (last lines):\n${stack.tail(80)}`);
      await stack.kill();
    }
    rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  it('holds no token in the UI settings or any process arguments; the codec decodes for the UI; resolve refuses it', async () => {
    const { ports, env } = await npmStartEnvironment(path.join(tmp, 'dev-server.sqlite'), {
      TASK_QUEUE: `e2e-codec-${randomUUID()}`,
    });
    const ui = `http://${HOST}:${ports.uiPort}`;
    const api = `http://${HOST}:${ports.apiPort}`;
    stack = new Stack(env);
    const s = stack;
    await s.until('"Press Ctrl-C to stop."', () => s.output.includes('Press Ctrl-C to stop.'), START_TIMEOUT_MS);
    s.snapshot();
    const tokens = [merchantToken, operatorToken];

    // 1. What anyone who reaches the UI can read: its settings, with the codec endpoint it calls.
    const settingsRes = await fetch(`${ui}/api/v1/settings`, { signal: AbortSignal.timeout(10_000) });
    expect(settingsRes.status).toBe(200);
    const settings = (await settingsRes.json()) as { Codec?: { Endpoint?: string } };
    const held = strings(settings);
    const endpoint = settings.Codec?.Endpoint ?? '';
    expect(endpoint.startsWith(`${api}/`)).toBe(true);
    for (const token of tokens) {
      expect(held.filter((v) => v.includes(token) || v.includes(encodeURIComponent(token)))).toEqual([]);
    }

    // 2. Nor in any process's arguments (the dev server was handed the codec endpoint on its command line).
    const commandLines = descendants(s.pid).map((p) => {
      try {
        return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').join(' ');
      } catch {
        return ''; // gone meanwhile
      }
    });
    expect(commandLines.some((c) => c.includes('--ui-codec-endpoint'))).toBe(true);
    for (const token of tokens) {
      expect(commandLines.filter((c) => c.includes(token) || c.includes(encodeURIComponent(token)))).toEqual([]);
    }

    // 3. The codec endpoint decodes for the UI: what its browser sends (its Origin, no Authorization).
    const codec = new AesGcmPayloadCodec(parsePayloadKeys(developmentDefaults.PAYLOAD_KEYS));
    const [sealed] = await codec.encode([defaultPayloadConverter.toPayload({ paymentMethod: 'pm_card_visa' })]);
    const json = {
      payloads: [
        {
          metadata: Object.fromEntries(
            Object.entries(sealed?.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? []).toString('base64')]),
          ),
          data: Buffer.from(sealed?.data ?? []).toString('base64'),
        },
      ],
    };
    const preflight = await fetch(`${endpoint}/decode`, {
      method: 'OPTIONS',
      headers: {
        origin: ui,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect([preflight.status, preflight.headers.get('access-control-allow-origin')]).toEqual([204, ui]);
    const decoded = await fetch(`${endpoint}/decode`, {
      method: 'POST',
      headers: { origin: ui, 'content-type': 'application/json', 'x-namespace': 'default' },
      body: JSON.stringify(json),
    });
    expect(decoded.status).toBe(200);
    const [plain] = ((await decoded.json()) as { payloads: { data: string }[] }).payloads;
    expect(Buffer.from(plain?.data ?? '', 'base64').toString()).toContain('pm_card_visa');

    // 4. An operator route refuses whatever the UI holds: its origin, and every string of its settings as a token.
    const resolve = (headers: Record<string, string>) =>
      fetch(`${api}/v1/payments/k-${randomUUID()}/resolve?merchantId=${merchantId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: ui, ...headers },
        body: JSON.stringify({ outcome: 'failed', note: 'from the UI' }),
      });
    expect((await resolve({})).status).toBe(401);
    const candidates = [...new Set(held.flatMap((v) => [v, ...v.split(/[/?&=:]/)]))].filter((v) =>
      /^[A-Za-z0-9._~+/=-]{16,256}$/.test(v),
    );
    for (const candidate of candidates) {
      expect({ candidate, status: (await resolve({ authorization: `Bearer ${candidate}` })).status }).toEqual({
        candidate,
        status: 401,
      });
    }
    // ...and the codec endpoint encodes for nobody without a token (decode is all the UI gets).
    const encode = await fetch(`${endpoint}/encode`, {
      method: 'POST',
      headers: { origin: ui, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    expect(encode.status).toBe(401);

    s.interrupt();
    await s.until('exit', () => s.exit !== undefined, 30_000, { intervalMs: 100, afterExit: true });
    passed = true;
  }, 180_000);
});
