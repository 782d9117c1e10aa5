/**
 * Capture and refund as signals (src/domain/definitions.ts says why): the workflow applies the same rules as the
 * updates' validators, records a refusal for its request instead of failing, and a request that arrives before the
 * first provider call settled waits for it (a signal is handled before the results of its workflow task).
 */
import { Worker } from '@temporalio/worker';
import { captureRequest, paymentQuery, refundRequest } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { opOf, within } from '../helpers/operations';
import { chargeRequest, idOf, workflowBundle } from '../helpers/payments';
import { recordHistories, startChargeOn, waitForStatus } from '../helpers/workflows';

const t = serverPerFile();

it('a capture requested while the authorization is in flight waits for it, then captures once; the history replays', async () => {
  const b = await t.world();
  await b.run(async () => {
    const input = b.input(chargeRequest({ capture: 'manual' }));
    await b.sim.addFaults({
      rules: [{ match: { operation: 'create' }, fault: 'latency', latency_ms: 1_500, times: 1 }],
    });
    const handle = await startChargeOn(b, input);
    // Sent before the provider answered the authorization: an update's validator would refuse it ("pending").
    await handle.signal(captureRequest.requested, {
      captureKey: 'cap-early',
      fingerprint: 'f-cap',
      requestId: 'req-1',
    });
    expect((await handle.query(paymentQuery)).status).toBe('pending');
    const answer = await eventually('the capture settled', async () => {
      const a = await handle.query(captureRequest.answer, 'capture', 'cap-early', 'req-1', 'f-cap');
      return a?.settled ? a : undefined;
    });
    expect(answer.refusal).toBeUndefined();
    expect(answer.view).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
    expect(opOf(answer.view, 'capture', 'cap-early')?.state).toBe('succeeded');
    expect(b.ledger().effects.map((e) => e.operation)).toEqual(['create', 'capture']);

    const history = await handle.fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, handle.workflowId);
    await recordHistories(b, 'capture-signal-before-authorization', [idOf(input)]);
  });
});

it('refuses a refund over the captured amount for its own request, with the validator’s type, and sends nothing', async () => {
  const b = await t.world();
  await b.run(async () => {
    const input = b.input(chargeRequest());
    const handle = await startChargeOn(b, input);
    await waitForStatus(handle, 'succeeded');
    const over = { refundKey: 'ref-over', fingerprint: 'f-over', amount: 1_001 };
    // The check a caller makes first answers the same refusal and records nothing.
    const check = await handle.query(refundRequest.check, 'refund', over);
    expect(check.refusal?.type).toBe(ErrorType.AmountExceeded);
    // Sent anyway (a caller that skipped the check, or the state changed in between): refused in the workflow.
    await handle.signal(refundRequest.requested, { ...over, requestId: 'req-over' });
    const refused = await eventually(
      'the refusal',
      async () => (await handle.query(refundRequest.answer, 'refund', 'ref-over', 'req-over', 'f-over')) ?? undefined,
    );
    expect(refused.refusal).toMatchObject({
      type: ErrorType.AmountExceeded,
      details: [{ field: 'amount', max: 1_000 }],
    });
    // Another request under the same key is not answered by that refusal, and the payment goes on.
    expect(await handle.query(refundRequest.answer, 'refund', 'ref-over', 'req-other', 'f-over')).toBeNull();
    await handle.signal(refundRequest.requested, {
      refundKey: 'ref-ok',
      fingerprint: 'f-ok',
      amount: 400,
      requestId: 'req-ok',
    });
    const ok = await within(
      15_000,
      eventually('the refund', async () => {
        const a = await handle.query(refundRequest.answer, 'refund', 'ref-ok', 'req-ok', 'f-ok');
        return a?.settled ? a : undefined;
      }),
      'the second refund',
    );
    expect(ok.view.amountRefunded).toBe(400);
    const effects = b.ledger().effects.map((e) => e.operation);
    expect(effects).toEqual(['create', 'refund']);
    const history = await handle.fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, handle.workflowId);
    await recordHistories(b, 'refund-signal-refused-then-refunded', [idOf(input)]);
  });
});
