/**
 * A capture or refund whose every attempt was refused before it was sent, and a Retry-After longer than anyone should
 * wait, on the dev server against the real simulator over HTTP and real workers:
 * - the provider's own 429 asking for 180 s is waited only PROVIDER_MAX_RETRY_AFTER_MS, then the capture goes through;
 * - a capture held off by an open breaker beyond its budget is `failed` (never sent), its request answered with the
 *   wait, nothing locked, and the same key tries again once the breaker lets writes through.
 */
import { Worker } from '@temporalio/worker';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { captureRequest, paymentQuery } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { opOf, within } from '../helpers/operations';
import { chargeRequest, idOf, workflowBundle } from '../helpers/payments';
import { recordHistories, requestsOf, startChargeOn, waitForStatus } from '../helpers/workflows';

const t = serverPerFile();

it("waits only the capped delay for a capture's own 429 asking for 180 s, then captures once", async () => {
  const b = await t.world({ maxRetryAfterMs: 2_000 });
  await b.run(async () => {
    const input = b.input(chargeRequest({ capture: 'manual' }));
    const handle = await startChargeOn(b, input);
    await waitForStatus(handle, 'authorized');
    b.sim.addFaults({
      rules: [{ match: { operation: 'capture' }, fault: 'status', status: 429, retry_after_s: 180, times: 1 }],
    });
    await handle.signal(captureRequest.requested, { captureKey: 'cap-1', fingerprint: 'f-1', requestId: 'req-1' });
    const answer = await within(
      15_000,
      eventually('the capture settled', async () => {
        const a = await handle.query(captureRequest.answer, 'capture', 'cap-1', 'req-1', 'f-1');
        return a?.settled ? a : undefined;
      }),
      'the capture',
    );
    expect(opOf(answer.view, 'capture', 'cap-1')?.state).toBe('succeeded');
    expect(answer.view).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
    const captures = requestsOf(b, 'capture');
    expect(captures.map((r) => r.status)).toEqual([429, 200]);
    // The second attempt waited the cap (2 s), not the 180 s asked for.
    const gapMs = (captures[1]?.at_ms ?? 0) - (captures[0]?.at_ms ?? 0);
    expect(gapMs).toBeGreaterThanOrEqual(2_000);
    expect(gapMs).toBeLessThan(10_000);
  });
});

it('a capture the open breaker kept from being sent is failed with the wait, locks nothing, and its key tries again', async () => {
  // Opens on one failure and stays open 4 s: longer than the capture's budget leaves for a wait (0.5 s).
  const breaker = new InMemoryCircuitBreaker({ failureThreshold: 1, cooldownMs: 4_000 });
  const b = await t.world({ breaker });
  await b.run(async () => {
    // One attempt of the world's provider may take 4 s (3 s call + overhead): 0.5 s of the budget is left for a wait.
    const capture = { initialIntervalMs: 100, maximumIntervalMs: 200, attemptTimeoutMs: 4_000, budgetMs: 4_500 };
    const input = b.input(chargeRequest({ capture: 'manual' }), { retry: { capture } });
    const handle = await startChargeOn(b, input);
    await waitForStatus(handle, 'authorized');
    breaker.record('simulator', ErrorType.NotSent);
    const answerOf = (key: string, requestId: string, fingerprint: string, answeredByTry?: number) =>
      eventually(`the answer to ${requestId}`, async () => {
        const a = await handle.query(captureRequest.answer, 'capture', key, requestId, fingerprint, answeredByTry);
        return a?.settled ? a : undefined;
      });

    await handle.signal(captureRequest.requested, { captureKey: 'cap-1', fingerprint: 'f-1', requestId: 'req-1' });
    const refused = await answerOf('cap-1', 'req-1', 'f-1');
    // Nothing locked: a second capture is not refused as in flight; the breaker keeps it from being sent too.
    await handle.signal(captureRequest.requested, { captureKey: 'cap-2', fingerprint: 'f-2', requestId: 'req-2' });
    const second = await answerOf('cap-2', 'req-2', 'f-2');
    expect({ refused, second: second.refusal }).toMatchObject({
      refused: {
        refusal: { type: ErrorType.ProviderUnavailable, details: [{ retryAfterMs: expect.any(Number) }] },
        view: {
          status: 'authorized',
          operations: [{ key: 'cap-1', state: 'failed', reason: 'provider_unavailable: breaker_open' }],
        },
      },
      second: { type: ErrorType.ProviderUnavailable },
    });
    expect(requestsOf(b, 'capture')).toHaveLength(0);

    // The same key again after the wait it was answered with: the breaker lets the probe through, and it captures.
    const waitMs = (refused.refusal?.details?.[0] as { retryAfterMs: number }).retryAfterMs;
    await new Promise((r) => setTimeout(r, waitMs));
    // The check names the next try (a key whose try never left is not known: the request is sent, as the client does).
    const check = await handle.query(captureRequest.check, 'capture', { captureKey: 'cap-1', fingerprint: 'f-1' });
    expect(check).toEqual({ answeredByTry: 2 });
    await handle.signal(captureRequest.requested, { captureKey: 'cap-1', fingerprint: 'f-1', requestId: 'req-3' });
    // That request is answered by its own try, never by the earlier failure.
    const again = await answerOf('cap-1', 'req-3', 'f-1', check.answeredByTry);
    expect(again.refusal).toBeUndefined();
    expect(again.view).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
    expect(opOf(again.view, 'capture', 'cap-1')).toMatchObject({ state: 'succeeded' });
    expect(opOf(again.view, 'capture', 'cap-1')?.reason).toBeUndefined();
    expect(opOf(again.view, 'capture', 'cap-2')).toMatchObject({ state: 'failed' });
    expect(requestsOf(b, 'capture').map((r) => r.status)).toEqual([200]);
    expect((await handle.query(paymentQuery)).status).toBe('succeeded');

    const history = await handle.fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, handle.workflowId);
    await recordHistories(b, 'capture-never-sent-then-retried', [idOf(input)]);
  });
});
