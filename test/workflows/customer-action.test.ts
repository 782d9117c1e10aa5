/**
 * Payments that wait for the customer (3-D Secure), on the time-skipping server against the real simulator over HTTP:
 * a `pm_3ds` token answers create with `requires_action`; the simulator's control endpoint plays the customer. The
 * hour-long wait is skipped: its expiry cancels at the provider (seen in the ledger) and declines `action_expired`.
 * Each scenario records its history (RECORD_HISTORIES=1) for the replay test.
 */
import { paymentQuery } from '../../src/domain/definitions';
import { timeSkippingServerPerTest } from '../helpers/world';
import { chargeRequest, idOf } from '../helpers/payments';
import { effectsOf, recordHistories, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = timeSkippingServerPerTest();
const HOUR = 3_600_000;

describe('chargeWorkflow: a payment that waits for the customer', () => {
  it('nobody acts for an hour: cancelled at the provider, declined action_expired, nothing charged', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ paymentMethod: 'pm_3ds_required' }), {
        timings: { customerActionTimeoutMs: HOUR },
      });
      const { handle, view } = await startCharge(b, input);
      expect(view).toMatchObject({ status: 'requires_action', amountAuthorized: 0, attempts: 1 });
      expect(view.nextAction).toEqual({
        type: 'redirect_to_url',
        url: `${b.sim.url}/_sim/payments/${view.providerPaymentId}/authenticate`,
      });
      const started = await t.env.currentTimeMs();
      await t.env.sleep('59 minutes');
      expect((await handle.query(paymentQuery)).status).toBe('requires_action');
      expect(requestsOf(b, 'void')).toHaveLength(0);
      await t.env.sleep('2 minutes');
      const expired = await waitForStatus(handle, 'declined');
      expect(expired).toMatchObject({ declineCode: 'action_expired', amountAuthorized: 0, amountCaptured: 0 });
      expect(expired.nextAction).toBeUndefined();
      expect((await t.env.currentTimeMs()) - started).toBeGreaterThanOrEqual(HOUR);
      // The cancel reached the provider: one void of this payment that moved nothing, and no create effect at all.
      expect(effectsOf(b, 'void')).toEqual([
        expect.objectContaining({ payment_id: view.providerPaymentId, amount: 0 }),
      ]);
      expect(effectsOf(b, 'create')).toHaveLength(0);
      expect(effectsOf(b, 'capture')).toHaveLength(0);
      // It looked the payment up on the reconcile's schedule while it waited (30 s, 2 min, 10 min, then hourly).
      expect(requestsOf(b, 'lookup').length).toBeGreaterThanOrEqual(3);
      expect((await handle.result()).status).toBe('declined');
      await recordHistories(b, 'customer-action-expired', [idOf(input)]);
    });
  });

  it.each([
    ['automatic', 'succeeded', 1_000],
    ['manual', 'authorized', 0],
  ] as const)(
    'the customer completes (%s capture): %s, one create effect, no cancel',
    async (capture, status, captured) => {
      const b = await t.world();
      await b.run(async () => {
        const input = b.input(chargeRequest({ paymentMethod: 'pm_3ds_required', capture }));
        const { handle, view } = await startCharge(b, input);
        expect(view.status).toBe('requires_action');
        const answer = await b.sim.authenticate(view.providerPaymentId as string, 'succeeded');
        expect(answer.status).toBe(200);
        // The world has no webhook route to the workflow: the wait's first look-up (30 s) finds it.
        await t.env.sleep('31 seconds');
        const done = await waitForStatus(handle, status);
        expect(done).toMatchObject({ amountAuthorized: 1_000, amountCaptured: captured, attempts: 1 });
        expect(done.providerPaymentId).toBe(view.providerPaymentId);
        expect(effectsOf(b, 'create')).toEqual([
          expect.objectContaining({ payment_id: view.providerPaymentId, amount: 1_000 }),
        ]);
        expect(requestsOf(b, 'create')).toHaveLength(1);
        expect(requestsOf(b, 'void')).toHaveLength(0);
        if (capture === 'automatic') await recordHistories(b, 'customer-action-completed', [idOf(input)]);
      });
    },
  );

  it('the customer fails the authentication: declined authentication_failed, nothing charged, no cancel', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ paymentMethod: 'pm_3ds_required' }));
      const { handle, view } = await startCharge(b, input);
      await b.sim.authenticate(view.providerPaymentId as string, 'failed');
      await t.env.sleep('31 seconds');
      const declined = await waitForStatus(handle, 'declined');
      expect(declined).toMatchObject({ declineCode: 'authentication_failed', amountAuthorized: 0 });
      expect(effectsOf(b, 'create')).toHaveLength(0);
      expect(requestsOf(b, 'void')).toHaveLength(0);
      expect((await handle.result()).status).toBe('declined');
      await recordHistories(b, 'customer-action-failed', [idOf(input)]);
    });
  });
});
