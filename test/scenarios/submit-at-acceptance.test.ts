/**
 * The charge that wedged in the 1,000-payment soak (docs/operations.md, "A charge wedged on its submit answer"): a
 * query answered while the local first attempt's result was pending made sdk-core record the local activity's marker
 * in a workflow task of its own; the next task, which would have answered `submit`, died with its worker; every
 * replay after that handed the result over while replaying, and the server refused each task's orphaned answer.
 *
 * No payment can get there now: `submit` is answered in the task that accepts it, before any local activity's result,
 * and the API reads the first call's answer by query. Here queries hammer payments whose local attempt the provider
 * holds (so tasks complete early with the attempt still running, as in the soak): each answers 200 with the settled
 * view, its history answers `submit` in the accepting task, and the provider holds one create.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import { paymentQuery } from '../../src/domain/definitions';
import { chargeWorkflowId } from '../../src/domain/ids';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';

const E = temporal.api.enums.v1.EventType;
/** Payments raced at once, each held a little longer at the provider. */
const PAYMENTS = 4;

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, webhooks: false });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

/** The event types from the update's acceptance to the next workflow task: what the accepting task recorded. */
const acceptingTask = (events: temporal.api.history.v1.IHistoryEvent[]): string[] => {
  const from = events.findIndex((e) => e.eventType === E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED);
  const rest = events.slice(from);
  const end = rest.findIndex((e) => e.eventType === E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED);
  return (end < 0 ? rest : rest.slice(0, end)).map((e) => E[e.eventType ?? 0] ?? '?');
};

it('queries during a held local first attempt: submit is answered in its accepting task, the API answers the settled charge', async () => {
  const keys = await Promise.all(
    Array.from({ length: PAYMENTS }, async (_, i) => {
      const key = newKey();
      const body = chargeBody();
      const orderId = body.orderId as string;
      h.sim.addFaults({
        rules: [
          {
            match: { operation: 'create', reference: orderId },
            fault: 'latency',
            latency_ms: 300 + 50 * i,
            times: 1,
          },
        ],
      });
      const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
      let posting = true;
      // Queries until the POST answered: each one the worker answers while the local attempt runs ends that task.
      const storm = async () => {
        while (posting) await handle.query(paymentQuery).catch(() => undefined);
      };
      const storms = [storm(), storm()];
      const answer = await h.request('POST', '/v1/payments', { key, body });
      posting = false;
      await Promise.all(storms);
      expect(answer.status).toBe(200);
      expect(answer.body.status).toBe('succeeded');
      const events = (await handle.fetchHistory()).events ?? [];
      expect(acceptingTask(events)).toContain('EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED');
      expect(events.filter((e) => e.eventType === E.EVENT_TYPE_WORKFLOW_TASK_FAILED)).toEqual([]);
      const effects = h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === orderId);
      expect(effects).toHaveLength(1);
      const read = await h.request('GET', `/v1/payments/${key}`);
      expect([read.status, read.body.status]).toEqual([200, 'succeeded']);
      return key;
    }),
  );
  await recordHistories({ env }, 'submit-at-acceptance', [chargeWorkflowId(h.a.id, keys[0] as string)]);
}, 120_000);
