/**
 * Manual capture, refunds and authorization expiry on the time-skipping server, against the real simulator. Captures
 * and refunds are sent as production's client sends them (test/helpers/requests.ts), checked against the payment's
 * single serialized state before any side effect.
 */
import { paymentQuery, refundRequest } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { captureWorkflowId, refundWorkflowId } from '../../src/domain/ids';
import { timeSkippingServerPerTest } from '../helpers/world';
import { chargeRequest, idOf } from '../helpers/payments';
import { capture, refund, refusalType } from '../helpers/requests';
import { effectsOf, recordHistories, requestsOf, startCharge } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const DAY = 24 * 3_600_000;

describe('manual capture', () => {
  it('captures part of the authorization once per capture key, then refunds within what was captured', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }));
      const { handle, view } = await startCharge(b, input);
      expect(view).toMatchObject({ status: 'authorized', amountAuthorized: 1_000, amountCaptured: 0 });

      const overCapture = await refusalType(
        capture(handle, { captureKey: 'cap-big', fingerprint: 'f-big', amount: 1_001 }),
      );
      expect(overCapture).toBe(ErrorType.AmountExceeded);
      expect(requestsOf(b, 'capture')).toHaveLength(0);

      const cap1 = { captureKey: 'cap-1', fingerprint: 'f-cap-1', amount: 600 };
      const captured = await capture(handle, cap1);
      expect(captured).toMatchObject({ status: 'succeeded', amountCaptured: 600 });
      // The same capture again (a retry from the order service): same answer, no second effect.
      const again = await capture(handle, cap1);
      expect(again.amountCaptured).toBe(600);
      expect(effectsOf(b, 'capture')).toHaveLength(1);
      // The same capture key with other parameters is a reused key.
      const reused = await refusalType(capture(handle, { ...cap1, fingerprint: 'f-other', amount: 100 }));
      expect(reused).toBe(ErrorType.IdempotencyKeyReused);

      // Refunds: never more than captured minus refunded.
      const overRefund = await refusalType(refund(handle, { refundKey: 'ref-big', fingerprint: 'f-rb', amount: 601 }));
      expect(overRefund).toBe(ErrorType.AmountExceeded);
      const refunded = await refund(handle, { refundKey: 'ref-1', fingerprint: 'f-r1', amount: 200 });
      expect(refunded).toMatchObject({ status: 'succeeded', amountCaptured: 600, amountRefunded: 200 });
      const tooMuchNow = await refusalType(refund(handle, { refundKey: 'ref-2', fingerprint: 'f-r2', amount: 401 }));
      expect(tooMuchNow).toBe(ErrorType.AmountExceeded);
      const rest = await refund(handle, { refundKey: 'ref-3', fingerprint: 'f-r3', amount: 400 });
      expect(rest.amountRefunded).toBe(600);
      expect(effectsOf(b, 'refund').map((e) => e.amount)).toEqual([200, 400]);

      // A second capture after the first: the authorization is spent (the provider released the rest).
      const secondCapture = await refusalType(
        capture(handle, { captureKey: 'cap-2', fingerprint: 'f-cap-2', amount: 100 }),
      );
      expect(secondCapture).toBe(ErrorType.InvalidTransition);

      await recordHistories(b, 'manual-capture-refund', [
        idOf(input),
        captureWorkflowId(input.merchantId, 'cap-1'),
        refundWorkflowId(input.merchantId, 'ref-1'),
      ]);
    });
  });

  it('concurrent refunds are serialized: each starts from the total the previous one left, together never over', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      const { handle } = await startCharge(b, input);
      // Slow refunds at the provider: all three requests are in the workflow while the first is in flight.
      b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'latency', latency_ms: 700, times: 3 }] });
      const results = await Promise.allSettled(
        [400, 400, 400].map((amount, i) => refund(handle, { refundKey: `r-${i}`, fingerprint: `f-${i}`, amount })),
      );
      const accepted = results.filter((r) => r.status === 'fulfilled');
      expect(accepted).toHaveLength(2);
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(await refusalType(Promise.reject(refused[0]?.reason))).toBe(ErrorType.AmountExceeded);
      // What the lock protects: each refund child was started with the total the one before it left behind.
      const befores: number[] = [];
      for (let i = 0; i < 3; i++) {
        const history = await t.env.client.workflow
          .getHandle(refundWorkflowId(input.merchantId, `r-${i}`))
          .fetchHistory()
          .catch(() => undefined);
        const started = history?.events?.[0]?.workflowExecutionStartedEventAttributes;
        if (!started) continue;
        const payload = started.input?.payloads?.[0];
        if (!payload) continue;
        const arg = t.env.client.options.loadedDataConverter.payloadConverter.fromPayload(payload);
        befores.push((arg as { amountRefundedBefore: number }).amountRefundedBefore);
      }
      expect(befores.sort((x, y) => x - y)).toEqual([0, 400]);
      const refundedTotal = effectsOf(b, 'refund').reduce((sum, e) => sum + e.amount, 0);
      expect(refundedTotal).toBe(800);
      expect(requestsOf(b, 'refund')).toHaveLength(2);
      expect((await handle.query(paymentQuery)).amountRefunded).toBe(800);
    });
  });

  it('an authorization nobody captures is voided when it expires, after skipped days', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), { timings: { authorizationExpiryMs: 7 * DAY } });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('authorized');
      const before = await t.env.currentTimeMs();
      const final = await handle.result(); // skips the 7 days
      expect((await t.env.currentTimeMs()) - before).toBeGreaterThanOrEqual(7 * DAY);
      expect(final).toMatchObject({ status: 'voided', amountCaptured: 0 });
      expect(effectsOf(b, 'void')).toHaveLength(1);
      const history = await handle.fetchHistory();
      const timers = history.events?.filter((e) => e.timerStartedEventAttributes) ?? [];
      expect(timers.length).toBeGreaterThanOrEqual(1);
      await recordHistories(b, 'authorization-expiry', [idOf(input)]);
    });
  });

  it('capture is refused on an automatic (already captured) payment, refund on a declined one', async () => {
    const b = await t.world();
    await b.run(async () => {
      const { handle } = await startCharge(b, b.input(chargeRequest()));
      expect(await refusalType(capture(handle, { captureKey: 'c', fingerprint: 'f' }))).toBe(
        ErrorType.InvalidTransition,
      );
      // A declined payment's workflow has closed: its check refuses the refund (the client answers 409), and no
      // request reaches it at all.
      const declined = await startCharge(b, b.input(chargeRequest({ paymentMethod: 'pm_decline' })));
      await declined.handle.result();
      const declinedRefund = { refundKey: 'r', fingerprint: 'f', amount: 1 };
      expect(await refusalType(refund(declined.handle, declinedRefund))).toBe(ErrorType.InvalidTransition);
      await expect(
        declined.handle.signal(refundRequest.requested, { ...declinedRefund, requestId: 'r-1' }),
      ).rejects.toThrow(/not found|completed/i);
      expect(requestsOf(b, 'capture')).toHaveLength(0);
      expect(requestsOf(b, 'refund')).toHaveLength(0);
    });
  });

  it('refund is refused on an open authorized payment that nothing captured yet: no refund request reaches the provider', async () => {
    const b = await t.world();
    await b.run(async () => {
      const { handle, view } = await startCharge(b, b.input(chargeRequest({ capture: 'manual' })));
      expect(view).toMatchObject({ status: 'authorized', amountAuthorized: 1_000, amountCaptured: 0 });

      const refused = await refusalType(refund(handle, { refundKey: 'r-early', fingerprint: 'f', amount: 1 }));

      // Refused because of the status, not merely because nothing is refundable yet (that would be amount_exceeded).
      expect(refused).toBe(ErrorType.InvalidTransition);
      expect(requestsOf(b, 'refund')).toHaveLength(0);
      // Still open and unchanged: the refusal moved nothing.
      expect(await handle.query(paymentQuery)).toMatchObject({
        status: 'authorized',
        amountCaptured: 0,
        amountRefunded: 0,
      });
      const history = await handle.fetchHistory();
      expect(history.events?.filter((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)).toHaveLength(0);
    });
  });
});
