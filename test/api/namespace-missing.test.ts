/**
 * A Temporal that answers NOT_FOUND for the namespace itself (a server restarting, or whose database restarts, answers
 * so until its namespace registry is loaded; the production-schedule soak saw one charge answered 500 by it): the API
 * answers 503 with Retry-After, the caller repeats with the same key, and nothing was started. Against the real dev
 * server, through a client of a namespace it does not have.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { PaymentsClient } from '../../src/client';
import { connectDevServer } from '../helpers/servers';
import { chargeBody, newKey, testTimings } from '../helpers/world';
import { STUB_TOKEN, startStubApi } from './stub';

let env: TestWorkflowEnvironment;
let api: { app: FastifyInstance; url: string };
const namespace = `pw-missing-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  env = await connectDevServer();
  const client = new Client({ connection: env.connection, namespace });
  api = await startStubApi(new PaymentsClient(client, { taskQueue: `q-${namespace}`, timings: testTimings }));
});
afterAll(async () => {
  await api?.app.close();
  await env?.teardown();
});

const post = (path: string, key: string, body: unknown) =>
  fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${STUB_TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('a namespace Temporal does not know (yet)', () => {
  it('answers a charge 503 with Retry-After, not 500: the caller repeats with the same key', async () => {
    const res = await post('/v1/payments', newKey(), chargeBody());
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({ error: { type: 'unavailable', message: 'Temporarily unavailable' } });
  });

  it('answers a capture of it 503 too', async () => {
    const res = await post(`/v1/payments/${newKey()}/capture`, newKey(), { amount: 100 });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
  });
});
