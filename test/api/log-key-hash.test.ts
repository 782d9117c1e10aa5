/**
 * Log lines correlate idempotency keys by a keyed hash (HMAC-SHA-256 with `LOG_HASH_SECRET`, 16 hex digits), never an
 * unsalted digest a guessable key could be found from: the function itself, the configuration, and the API process's
 * request log line as the configured stack writes it.
 */
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { loadConfig } from '../../src/config';
import { newPayloadKey } from '../../src/codec';
import { chargeWorkflowId } from '../../src/domain/ids';
import { configureKeyHash, keyHash } from '../../src/providers/logging';
import { startConfiguredStack } from '../../src/stack';
import { connectDevServer } from '../helpers/servers';
import { postCharge } from '../helpers/api-charge';

const sha256Prefix = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 16);
const hmacPrefix = (secret: string, key: string) => createHmac('sha256', secret).update(key).digest('hex').slice(0, 16);

describe('keyHash', () => {
  it('is an HMAC under the configured secret, not the plain SHA-256 of the key', () => {
    configureKeyHash('secret-one-for-log-hashes');
    const key = 'order-1001'; // a guessable key: its plain digest is a dictionary look-up away
    expect(keyHash(key)).toBe(hmacPrefix('secret-one-for-log-hashes', key));
    expect(keyHash(key)).not.toBe(sha256Prefix(key));
    expect(keyHash(key)).toMatch(/^[0-9a-f]{16}$/);
    configureKeyHash('secret-two-for-log-hashes');
    expect(keyHash(key)).toBe(hmacPrefix('secret-two-for-log-hashes', key));
  });
});

describe('LOG_HASH_SECRET', () => {
  it('is read from the environment; without it, a secret is derived from the current payload key', () => {
    expect(loadConfig({ LOG_HASH_SECRET: 'a-log-hash-secret-of-ours' }).LOG_HASH_SECRET).toBe(
      'a-log-hash-secret-of-ours',
    );
    const one = loadConfig({ PAYLOAD_KEYS: newPayloadKey('k1') }).LOG_HASH_SECRET;
    const two = loadConfig({ PAYLOAD_KEYS: newPayloadKey('k1') }).LOG_HASH_SECRET;
    expect(one).not.toBe(two);
    expect(one.length).toBeGreaterThanOrEqual(32);
    expect(() => loadConfig({ LOG_HASH_SECRET: 'short' })).toThrow(/LOG_HASH_SECRET/);
  });
});

describe('the configured API process', () => {
  let env: TestWorkflowEnvironment;
  beforeAll(async () => {
    env = await connectDevServer();
  });
  afterAll(async () => {
    await env?.teardown();
  });

  it('writes the keyed hash of each key into its request log line, never the plain digest', async () => {
    const secret = `log-hash-${randomUUID()}`;
    const config = loadConfig({
      TEMPORAL_ADDRESS: env.address,
      // No worker polls this queue: the payment starts and waits (202), which is all this test looks at.
      TASK_QUEUE: `log-hash-${randomUUID()}`,
      HOST: '127.0.0.1',
      PORT: '0',
      SUBMIT_WAIT_MS: '300',
      LOG_HASH_SECRET: secret,
    });
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const stack = await startConfiguredStack(config, pino({ level: 'info' }, sink), { api: true });
    const key = `order-${randomUUID().slice(0, 4)}`;
    const merchantId = config.API_TOKENS[0]?.merchantId ?? '';
    try {
      const res = await postCharge(stack.api?.url, config.API_TOKENS[0]?.token, key);
      expect(res.status).toBe(202);
      const request = lines.find((l) => l.msg === 'request' && l.route === '/v1/payments');
      expect(request?.idempotencyKeyHash).toBe(hmacPrefix(secret, key));
      expect(JSON.stringify(lines)).not.toContain(sha256Prefix(key));
      expect(JSON.stringify(lines)).not.toContain(key);
    } finally {
      await env.client.workflow
        .getHandle(chargeWorkflowId(merchantId, key))
        .terminate('test over')
        .catch(() => undefined);
      await stack.close();
    }
  });
});
