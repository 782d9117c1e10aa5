/**
 * Money-path regressions that need the dev server: the time-skipping test server does not tell a parent that its
 * child was terminated, and that is the path under test here.
 */
import { ErrorType } from '../../src/domain/errors';
import { reconcileWorkflowId } from '../../src/domain/ids';
import { eventually } from '../helpers/eventually';
import { serverPerFile } from '../helpers/world';
import { opOf, unknownRefundRetry, within } from '../helpers/operations';
import { chargeRequest, idOf } from '../helpers/payments';
import { refund, refusalType, resolve } from '../helpers/requests';
import { effectsOf, recordHistories, startCharge, waitForStatus } from '../helpers/workflows';

const t = serverPerFile();

const HOUR = 3_600_000;

describe('an unknown refund outcome', () => {
  it('answers the request at once, reconciles beside it, and goes to review when its reconcile is terminated', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        retry: unknownRefundRetry,
        timings: { reconcileScheduleMs: [HOUR, HOUR] },
      });
      const { handle } = await startCharge(b, input);
      b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'status', status: 500 }] });
      const view = await within(
        20_000,
        refund(handle, { refundKey: 'r-unknown', fingerprint: 'f', amount: 400 }),
        'the refund request',
      );
      expect(opOf(view, 'refund', 'r-unknown')?.state).toBe('running');
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'refund', 'r-unknown'));
      // The reconcile child starts beside the answered request: wait (bounded) until the server shows it.
      const status = await eventually(
        'the reconcile child running',
        async () => {
          const name = (await reconcile.describe()).status.name;
          return name === 'RUNNING' && name;
        },
        10_000,
        100,
      );
      expect(status).toBe('RUNNING');
      // While it is reconciled nothing else moves money on this payment.
      expect(await refusalType(refund(handle, { refundKey: 'r-next', fingerprint: 'f2', amount: 1 }))).toBe(
        ErrorType.OperationInFlight,
      );

      await reconcile.terminate('an operator stopped it');
      const review = await waitForStatus(handle, 'needs_review');
      expect(opOf(review, 'refund', 'r-unknown')).toMatchObject({ state: 'needs_review' });
      expect(review.review?.reason).toMatch(/reconcile of refund ended without a result/);
      expect(effectsOf(b, 'refund')).toHaveLength(0);

      // The operator says it did not happen: the payment is back to succeeded, the operation rejected.
      const resolved = await resolve(handle, { outcome: 'failed', note: 'not at provider' });
      expect(resolved.status).toBe('succeeded');
      expect(resolved.amountRefunded).toBe(0);
      expect(opOf(resolved, 'refund', 'r-unknown')?.state).toBe('rejected');
      await recordHistories(b, 'refund-reconcile-terminated', [idOf(input)]);
    });
  });
});
