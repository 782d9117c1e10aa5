/**
 * Lookups by reference against the REAL simulator over HTTP, with two merchants of ours sharing one provider api key
 * (as the product does: one PROVIDER_API_KEY for every merchant), so a search by reference sees both merchants'
 * payments of an order. Only a payment whose metadata names this merchant and key, or the one metadata-less payment
 * matching every field, is adopted.
 */
import { randomUUID } from 'node:crypto';
import type { Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { pino } from 'pino';
import { type Activities, createActivities } from '../../src/activities';
import { ErrorType } from '../../src/domain/errors';
import { RestProvider, simulatorCapabilitiesWithoutKeys } from '../../src/providers/rest/adapter';
import type { ProviderPayment } from '../../src/providers/types';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { paymentMetadata } from '../../src/workflows/activity-options';

let sim: RunningSimulator;
let provider: RestProvider;
let acts: Activities;
let apiKey: string;

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(async () => {
  apiKey = `sk_test_${randomUUID()}`;
  // A provider without keys: every lookup of a lost create goes by reference.
  await sim.setMerchant(apiKey, { idempotency: false });
  provider = new RestProvider({
    name: 'simulator',
    baseUrl: sim.url,
    apiKey,
    capabilities: simulatorCapabilitiesWithoutKeys(),
    connectTimeoutMs: 500,
    totalTimeoutMs: 2_000,
    logger: pino({ level: 'silent' }),
  });
  acts = createActivities({ providers: { simulator: provider }, logger: pino({ level: 'silent' }) });
});
afterEach(async () => {
  sim.clearFaults();
  await provider.close();
});

const A = { merchantId: `ma_${randomUUID().slice(0, 8)}`, key: `key_a_${randomUUID()}` };
const B = { merchantId: `mb_${randomUUID().slice(0, 8)}`, key: `key_b_${randomUUID()}` };

const attemptEnv = (attempt: number, info: Partial<Info> = {}) =>
  new MockActivityEnvironment(
    {
      attempt,
      scheduledTimestampMs: Date.now() - 1_000,
      currentAttemptScheduledTimestampMs: Date.now(),
      scheduleToCloseTimeoutMs: 120_000,
      startToCloseTimeoutMs: 15_000,
      ...info,
    },
    { logger: new DefaultLogger('ERROR') },
  );
const run = <A extends unknown[], R>(env: MockActivityEnvironment, fn: (...args: A) => Promise<R>, ...args: A) =>
  env.run(fn, ...args) as Promise<R>;

/** A payment at the provider of `reference` for 15.00 EUR, with `metadata` (none when null). */
async function paymentAtProvider(reference: string, metadata: Record<string, string> | null): Promise<ProviderPayment> {
  const result = await provider.createPayment(
    {
      amount: 1_500,
      currency: 'EUR',
      reference,
      paymentMethod: 'pm_card_visa',
      capture: 'automatic',
      ...(metadata === null ? {} : { metadata }),
    },
    { idempotencyKey: `direct_${randomUUID()}`, attempt: 1 },
  );
  if (result.outcome === 'declined') throw new Error('declined');
  return result.payment;
}

/** A's reconcile lookup of its lost create (the args `reconcileWorkflow` passes). */
const lookupOfA = (reference: string, notBeforeMs: number) =>
  run(attemptEnv(1), acts.lookupPayment, {
    provider: 'simulator',
    merchantId: A.merchantId,
    key: A.key,
    operation: 'create' as const,
    reference,
    match: { amount: 1_500, currency: 'EUR', createdGteMs: notBeforeMs },
  });

/** A's charge as the charge workflow sends it (metadata naming A). */
const chargeOfA = (reference: string) => ({
  provider: 'simulator',
  merchantId: A.merchantId,
  key: A.key,
  input: {
    amount: 1_500,
    currency: 'EUR',
    reference,
    paymentMethod: 'pm_card_visa',
    capture: 'automatic' as const,
    metadata: paymentMetadata(A.merchantId, A.key),
  },
});

describe('lookupPayment by reference, two merchants on one provider account', () => {
  it('A’s create was lost before commit, B’s of the same order and amount succeeded: A’s lookup does not adopt it', async () => {
    const reference = `order_${randomUUID()}`;
    const sentAt = Date.now();
    sim.addFaults({ rules: [{ match: { operation: 'create', reference }, fault: 'reset_before_commit', times: 1 }] });
    const lost = await run(attemptEnv(1), acts.createPayment, chargeOfA(reference)).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ApplicationFailure);
    expect((lost as ApplicationFailure).type).toBe(ErrorType.OutcomeUnknown);
    await paymentAtProvider(reference, paymentMetadata(B.merchantId, B.key));

    expect(await lookupOfA(reference, sentAt)).toBeNull();
    expect(sim.ledger(apiKey).effects.filter((e) => e.operation === 'create')).toHaveLength(1); // B's only
  });

  it('A’s create committed and its answer was lost, B’s came later: A’s lookup adopts A’s own, not the newest', async () => {
    const reference = `order_${randomUUID()}`;
    const sentAt = Date.now();
    sim.addFaults({ rules: [{ match: { operation: 'create', reference }, fault: 'commit_then_drop', times: 1 }] });
    await run(attemptEnv(1), acts.createPayment, chargeOfA(reference)).catch(() => undefined);
    const mine = sim.ledger(apiKey).effects.find((e) => e.operation === 'create' && e.reference === reference);
    await sim.advanceClock(5); // B's payment is strictly the newest
    const theirs = await paymentAtProvider(reference, paymentMetadata(B.merchantId, B.key));

    const found = await lookupOfA(reference, sentAt);
    expect(found?.id).toBe(mine?.payment_id);
    expect(found?.id).not.toBe(theirs.id);
  });

  it('without metadata: two payments matching every field are ambiguous (null), one is adopted', async () => {
    const reference = `order_${randomUUID()}`;
    const sentAt = Date.now();
    const first = await paymentAtProvider(reference, null);
    expect((await lookupOfA(reference, sentAt))?.id).toBe(first.id);
    await sim.advanceClock(5);
    await paymentAtProvider(reference, null);
    expect(await lookupOfA(reference, sentAt)).toBeNull();
  });

  it('a payment whose metadata names another integration is not adopted either', async () => {
    const reference = `order_${randomUUID()}`;
    const sentAt = Date.now();
    await paymentAtProvider(reference, { merchant_id: B.merchantId });
    expect(await lookupOfA(reference, sentAt)).toBeNull();
  });
});

describe('createPayment look-up-before-resend, two merchants on one provider account', () => {
  it('attempt 2 finds its own payment (metadata naming A) next to one without metadata: recovered, not ambiguous', async () => {
    const reference = `order_${randomUUID()}`;
    sim.addFaults({ rules: [{ match: { operation: 'create', reference }, fault: 'commit_then_drop', times: 1 }] });
    await run(attemptEnv(1), acts.createPayment, chargeOfA(reference)).catch(() => undefined);
    await paymentAtProvider(reference, null);

    const retry = await run(attemptEnv(2), acts.createPayment, chargeOfA(reference));
    expect(retry).toMatchObject({ recovered: true, payment: { metadata: paymentMetadata(A.merchantId, A.key) } });
    expect(sim.ledger(apiKey).effects.filter((e) => e.operation === 'create')).toHaveLength(2); // nothing re-sent
  });

  it('a charge sent without metadata never recovers another merchant’s payment of the same order and amount', async () => {
    const reference = `order_${randomUUID()}`;
    const theirs = await paymentAtProvider(reference, paymentMetadata(B.merchantId, B.key));
    const { metadata: _none, ...bare } = chargeOfA(reference).input;

    // Attempt 1 never reached the provider; attempt 2 looks first and must not take B's payment for A's.
    const retry = await run(attemptEnv(2), acts.createPayment, { ...chargeOfA(reference), input: bare });
    expect(retry).toMatchObject({ recovered: false });
    if (retry.outcome === 'declined') throw new Error('declined');
    expect(retry.payment.id).not.toBe(theirs.id);
  });
});
