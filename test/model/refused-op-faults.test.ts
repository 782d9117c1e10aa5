/**
 * The money model's fault for a capture the API refused must not outlive it (seed 1825762147, path
 * 8:7:4:4:4:4:6:5:5): a `pm_3ds` payment the customer completed, webhooks off, a capture with `hiddenEffect` refused
 * 409 `invalid_transition` (nothing sent). Left armed, its 404 look-ups hide the completed payment from the wait for the
 * customer, which stays `requires_action` for over a minute; taken off, the wait's next look-up finds it `succeeded`.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { PaymentView } from '../../src/domain/payment';
import { eventually } from '../helpers/eventually';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, newKey, startWorld } from '../helpers/world';
import { Capture } from './commands';
import { removeFaultRules } from './faults';
import { type ChargeBody, newModel } from './model';
import { type World, modelRetry, modelTimings } from './world';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, webhooks: false, timings: modelTimings, retry: modelRetry });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

it('a capture refused while the customer is awaited leaves no fault behind: the completed payment settles', async () => {
  // The parts of the model's world a capture command uses, over this world (merchant A only).
  const w = {
    api: (method: string, path: string, opts: { key?: string; body?: unknown }) =>
      h.request(method, path, { ...(opts.key === undefined ? {} : { key: opts.key }), body: opts.body }),
    sim: {
      addFaults: async (rules: Parameters<World['sim']['addFaults']>[0]) => void h.sim.addFaults({ rules: [...rules] }),
      removeFaults: async (rules: Parameters<World['sim']['removeFaults']>[0]) => removeFaultRules(h.sim, rules),
    },
  } as unknown as World;
  const m = newModel('rof');
  const key = newKey();
  const body: ChargeBody = {
    orderId: `order_${key}`,
    amount: { value: 1_500, currency: 'EUR' },
    paymentMethod: 'pm_3ds_required',
    capture: 'automatic',
  };
  const first = await h.request('POST', '/v1/payments', { key, body });
  const view = PaymentView.parse(first.body);
  expect(view.status).toBe('requires_action');
  m.payments.push({ merchant: 'a', key, body, view, views: [view] });
  const auth = await fetch(view.nextAction?.url ?? '', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ result: 'succeeded' }),
  });
  expect(auth.status).toBe(200);

  await new Capture(0, 'full', 0, { kind: 'hiddenEffect', latencyMs: 800 }).run(m, w);
  expect(m.trace.at(-1)).toMatch(/409 invalid_transition$/);

  const settled = await eventually(
    'the completed payment leaves requires_action',
    async () => {
      const v = PaymentView.parse((await h.request('GET', `/v1/payments/${key}`)).body);
      return v.status !== 'requires_action' && v;
    },
    20_000,
    200,
  );
  expect(settled).toMatchObject({ status: 'succeeded', amountCaptured: 1_500 });
}, 60_000);
