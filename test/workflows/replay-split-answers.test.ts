/**
 * What a run hands over (the payment's news, its key's answers, the ledger's arguments) and what it ends with (the
 * payment's final view) must not depend on where a busy worker put a workflow task boundary. A local activity's answer
 * may reach the workflow a task after the one that recorded its marker; a replay resolves it where its marker is, so
 * code that reacted a task later in the run runs a task earlier in the replay, at that task's clock. A view stamped
 * from the workflow's clock there is rebuilt with another `updatedAt` than the API answered (the cluster soak found a
 * split payment's key record 22 ms off its answer: its wallet part's in-task release, heard a task later than
 * recorded).
 *
 * The adversary: every recorded history, as recorded and split after each of its local activity markers
 * (test/helpers/split-history.ts), replayed with an interceptor that reports every activity scheduled and the run's
 * result; each split must report what the recorded history reports. Only histories recorded before their fix may
 * differ, named with the fix.
 */
import { type InjectedSinks, Worker } from '@temporalio/worker';
import type { PaymentSinks } from '../../src/domain/sinks';
import type { ScheduledSinks } from '../helpers/scheduled-inputs-interceptor';
import { splitHistories } from '../helpers/split-history';
import { buildWorkflowBundle } from '../helpers/workflow-bundle';

/** Histories recorded before their fix: a split moves their release's clock, so their view differs. */
const KNOWN_BEFORE_FIX: Record<string, string> = {
  'wallet-split-payment-declined-before-settle-ledger-time.0.json': 'wallet-settle-ledger-time',
  'wallet-split-payment-declined-before-settle-asked-first.0.json': 'wallet-settle-ledger-time',
};

it('hands over the same news and answers wherever a task boundary falls after a local activity', async () => {
  const workflowBundle = await buildWorkflowBundle([require.resolve('../helpers/scheduled-inputs-interceptor')]);
  const seen = new Map<string, string[]>();
  const report = (workflowId: string, what: unknown): void => {
    seen.set(workflowId, [...(seen.get(workflowId) ?? []), JSON.stringify(what)]);
  };
  const sinks: InjectedSinks<ScheduledSinks & PaymentSinks> = {
    // The workflows' metrics sink (never called during replay), so no call is reported unregistered.
    paymentMetrics: { reconcile: { fn: () => undefined }, failover: { fn: () => undefined } },
    scheduled: {
      input: {
        fn: (info, kind, activityType, args) => report(info.workflowId, { kind, activityType, args }),
        callDuringReplay: true,
      },
      result: { fn: (info, result) => report(info.workflowId, { result }), callDuringReplay: true },
    },
  };
  const variants = splitHistories(() => true, true);
  const failed = new Set<string>();
  for await (const result of Worker.runReplayHistories({ workflowBundle, sinks }, variants)) {
    // A replay that fails is replay-split-tasks.test.ts's to judge; here only what the others report.
    if (result.error) failed.add(result.workflowId);
  }
  const differ = new Map<string, string>();
  let compared = 0;
  for (const { workflowId } of variants) {
    const [file = '', marker] = workflowId.split('#');
    if (marker === undefined || failed.has(workflowId) || failed.has(file)) continue;
    compared += 1;
    const [recorded, split] = [seen.get(file) ?? [], seen.get(workflowId) ?? []];
    const at = recorded.findIndex((r, i) => r !== split[i]);
    if (at >= 0 || recorded.length !== split.length) differ.set(workflowId, `${recorded[at]}\n${split[at]}`);
  }
  expect(compared).toBeGreaterThan(50);
  // The interceptor heard the runs (a continued run may schedule nothing and not end: it reports nothing).
  const unheard = variants
    .filter((v) => !v.workflowId.includes('#') && !seen.has(v.workflowId))
    .map((v) => v.workflowId);
  expect(unheard.filter((id) => id.startsWith('wallet-') || id.startsWith('charge-succeeded'))).toEqual([]);
  const unexpected = [...differ].filter(([id]) => KNOWN_BEFORE_FIX[id.split('#')[0] ?? ''] === undefined);
  expect(unexpected).toEqual([]);
  // Each known one still differs (else it no longer needs its excuse), in its view's `updatedAt` alone.
  for (const file of Object.keys(KNOWN_BEFORE_FIX)) {
    const theirs = [...differ].filter(([id]) => id.startsWith(`${file}#`));
    expect({ file, differs: theirs.length > 0 }).toEqual({ file, differs: true });
    for (const [, both] of theirs) {
      const [recorded, split] = both.split('\n').map((r) => JSON.parse(r) as { result: Record<string, unknown> });
      expect({ ...split?.result, updatedAt: undefined }).toEqual({ ...recorded?.result, updatedAt: undefined });
    }
  }
  console.log(`[replay-split-answers] ${compared} split histories compared, ${differ.size} known to differ`);
}, 300_000);
