/**
 * Shape 3's local first attempt when it does not settle the charge: the regular activity on the provider's queue takes
 * over with the same idempotency key, so the provider holds one effect whatever the local attempt did (timed out with
 * its request at the provider, lost its response after the provider committed), and a create that never left ends
 * exactly as it did before (failed `provider_unavailable`). Every money claim is checked in the simulator's ledger.
 */
import { defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import pino from 'pino';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import type { RestProvider } from '../../src/providers';
import { refusingProvider } from '../helpers/refusing-provider';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld, testRetry } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const EventType = temporal.api.enums.v1.EventType;
/** The local attempt's bound here: shorter than the latency below, which is shorter than the HTTP timeout (1.5 s). */
const LOCAL_ATTEMPT_MS = 400;

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let down: RestProvider;

beforeAll(async () => {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  down = await refusingProvider('down', logger);
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    extraProviders: { down },
    webhooks: false,
    timings: { localAttemptTimeoutMs: LOCAL_ATTEMPT_MS },
    // Three attempts in all (the local one counted): a resend that meets the timed-out request still in flight at the
    // provider (409 concurrent use) gets one more try after the backoff instead of going to reconcile.
    retry: { create: { ...testRetry.create, maximumAttempts: 3 } },
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await down?.close();
  await env?.teardown();
});

const historyOf = async (key: string) =>
  (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory()).events ?? [];
const count = (events: Awaited<ReturnType<typeof historyOf>>, type: number) =>
  events.filter((e) => e.eventType === type).length;
const creates = (orderId: string) =>
  h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === orderId);
const createRequests = (orderId: string) =>
  h.ledger().requests.filter((r) => r.operation === 'create' && r.reference === orderId);
/** A history event's summary (user metadata), decoded; undefined when it has none. */
const summaryOf = (event: temporal.api.history.v1.IHistoryEvent): string | undefined => {
  const payload = event.userMetadata?.summary;
  return payload ? defaultPayloadConverter.fromPayload<string>(payload) : undefined;
};
const settled = (key: string, status: PaymentView['status']) =>
  eventually(
    `payment ${key} ${status}`,
    async () => {
      const res = await h.request('GET', `/v1/payments/${key}`);
      return res.body.status === status ? (res.body as unknown as PaymentView) : undefined;
    },
    20_000,
  );

it('a local attempt that timed out with its request at the provider: the activity finishes it under the same key, one effect', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  h.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: orderId }, fault: 'latency', latency_ms: 1_000, times: 1 }],
  });

  const answer = await h.request('POST', '/v1/payments', { key, body });

  expect(answer.status).toBe(200);
  expect(answer.body.status).toBe('succeeded');
  const events = await historyOf(key);
  // The local attempt is in history (its marker), and so is the activity that took over.
  expect(count(events, EventType.EVENT_TYPE_MARKER_RECORDED)).toBe(1);
  expect(count(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)).toBe(1);
  // The provider saw the key once or twice (the timed-out request may have arrived), always the same key: one effect.
  const requests = createRequests(orderId);
  const expectedKey = providerIdempotencyKey(h.a.id, 'create', key);
  expect(requests.length).toBeGreaterThanOrEqual(1);
  expect(new Set(requests.map((r) => r.idempotency_key))).toEqual(new Set([expectedKey]));
  expect(creates(orderId)).toHaveLength(1);
  // Every request the provider saw is an attempt of the payment's (the local one and the activity's alike).
  expect((await settled(key, 'succeeded')).attempts).toBe(requests.length);
  await recordHistories({ env }, 'local-first-timed-out', [chargeWorkflowId(h.a.id, key)]);
}, 30_000);

it('a local attempt whose response was lost after the provider committed (commit_then_drop): one effect, no second charge', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  h.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: orderId }, fault: 'commit_then_drop', times: 1 }],
  });

  const answer = await h.request('POST', '/v1/payments', { key, body });

  expect(answer.status).toBe(200);
  expect(answer.body.status).toBe('succeeded');
  const requests = createRequests(orderId);
  // The dropped request and the activity's resend, answered from the provider's stored answer for the key.
  expect(requests.map((r) => [r.fault ?? null, r.replayed ?? false])).toEqual([
    ['commit_then_drop', false],
    [null, true],
  ]);
  expect(creates(orderId)).toHaveLength(1);
  // The provider saw the create twice (one dropped, one replayed): two attempts, not one.
  expect(answer.body.attempts).toBe(2);
  const events = await historyOf(key);
  expect(count(events, EventType.EVENT_TYPE_MARKER_RECORDED)).toBe(1);
  expect(count(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)).toBe(1);
  // Succeeded at the time the activity heard the provider, as its result recorded it (not the clock of the task that
  // applied it, which a query ahead of that task would not share).
  const completed = events.find((e) => e.activityTaskCompletedEventAttributes)?.activityTaskCompletedEventAttributes;
  const payload = completed?.result?.payloads?.[0];
  const result = payload ? defaultPayloadConverter.fromPayload<{ at?: string }>(payload) : undefined;
  expect(typeof result?.at).toBe('string');
  expect(answer.body.updatedAt).toBe(result?.at);
}, 30_000);

it('a refused connection on the local attempt and on every retry: failed provider_unavailable, nothing sent, as before', async () => {
  const key = newKey();
  const body = chargeBody({ provider: 'down' });

  const answer = await h.request('POST', '/v1/payments', { key, body });

  expect(answer.status).toBeLessThan(300);
  const view = await settled(key, 'failed');
  expect(view.failureReason).toBe('provider_unavailable');
  // Not one attempt reached the provider.
  expect(view.attempts).toBe(0);
  const events = await historyOf(key);
  // The local attempt, then the activity's own attempts (the test retry policy's two) on the provider's queue.
  expect(count(events, EventType.EVENT_TYPE_MARKER_RECORDED)).toBe(1);
  expect(count(events, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)).toBe(1);
  expect(count(events, EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)).toBe(0); // no reconcile
  // Failed at the time the activity gave up, as its failure recorded it: a query that applies that failure ahead of
  // the task that records it (docs/sdk-update-ordering.md) answers the same view as the task, and every replay.
  const failure = events.find((e) => e.activityTaskFailedEventAttributes)?.activityTaskFailedEventAttributes?.failure;
  const details = failure?.applicationFailureInfo?.details?.payloads?.[0];
  const recorded = details ? defaultPayloadConverter.fromPayload<{ at?: string }>(details) : undefined;
  expect(typeof recorded?.at).toBe('string');
  expect(view.updatedAt).toBe(recorded?.at);
}, 30_000);

it('a 429 with Retry-After on the local attempt: the activity sends again only after the wait the provider asked for', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  h.sim.addFaults({
    rules: [
      { match: { operation: 'create', reference: orderId }, fault: 'status', status: 429, retry_after_s: 1, times: 1 },
    ],
  });

  const answer = await h.request('POST', '/v1/payments', { key, body });

  expect(answer.status).toBe(200);
  expect(answer.body.status).toBe('succeeded');
  const requests = createRequests(orderId);
  expect(requests.map((r) => r.status)).toEqual([429, expect.any(Number)]);
  const [first, second] = requests;
  expect((second?.at_ms ?? 0) - (first?.at_ms ?? 0)).toBeGreaterThanOrEqual(1_000);
  expect(creates(orderId)).toHaveLength(1);
  // Every timer in the payment's history says what it waits for; the first is the wait before the activity takes over.
  const timers = (await historyOf(key)).filter((e) => e.eventType === EventType.EVENT_TYPE_TIMER_STARTED);
  expect(timers.map(summaryOf)).toEqual([
    'wait 1 s before create payment at simulator takes over from the local first attempt',
    expect.stringMatching(/^accept refunds until the refund window closes in /),
  ]);
  expect(answer.body.attempts).toBe(2); // the 429 reached the provider too
}, 30_000);
