import { appendFile, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { IdempotencyTable } from '../../src/simulator/idempotency';
import {
  authenticatePayment,
  capturePayment,
  createPayment,
  refundPayment,
  voidPayment,
  type Outcome,
} from '../../src/simulator/payments';
import { restoreState, StateJournal } from '../../src/simulator/persistence';
import { startSimulator } from '../../src/simulator/server';
import type { SimState } from '../../src/simulator/state';
import { SimStore } from '../../src/simulator/store';
import { call, createBody, newApiKey, newKey } from './helpers';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sim-journal-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** The state with its unordered collections sorted, so two equal states compare equal whatever their insertion order. */
function normalized(s: SimState): SimState {
  const by =
    <T>(key: (t: T) => string) =>
    (a: T, b: T) =>
      key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
  return {
    ...s,
    payments: [...s.payments].sort(by((p) => p.id)),
    idempotency: [...s.idempotency].sort(by((r) => `${r.api_key}\u0000${r.key}`)),
  };
}

/** One step of the simulator's life, in the store's own terms (what its HTTP handlers call). */
type Step =
  | { op: 'create'; merchant: number; method: 'card' | 'decline' | '3ds'; manual: boolean; amount: number }
  | { op: 'repeat'; nth: number; commits: boolean }
  | { op: 'capture' | 'void' | 'authenticate-ok' | 'authenticate-failed'; nth: number }
  | { op: 'refund'; nth: number; amount: number }
  | { op: 'merchant'; merchant: number; ttl: number }
  | { op: 'advance'; seconds: number }
  | { op: 'request' }
  | { op: 'settle'; nth: number; status: number }
  | { op: 'save' | 'save-later' | 'restart' | 'reset' };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('create' as const),
      merchant: fc.nat(1),
      method: fc.constantFrom('card' as const, 'decline' as const, '3ds' as const),
      manual: fc.boolean(),
      amount: fc.integer({ min: 1, max: 5_000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('repeat' as const), nth: fc.nat(), commits: fc.boolean() }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constantFrom(
        'capture' as const,
        'void' as const,
        'authenticate-ok' as const,
        'authenticate-failed' as const,
      ),
      nth: fc.nat(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('refund' as const),
      nth: fc.nat(),
      amount: fc.integer({ min: 1, max: 3_000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('merchant' as const),
      merchant: fc.nat(1),
      ttl: fc.integer({ min: 1, max: 100 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('advance' as const), seconds: fc.integer({ min: 1, max: 60 }) }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('request' as const) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      nth: fc.nat(),
      status: fc.constantFrom(200, 402, 500),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constantFrom('save' as const, 'save-later' as const, 'restart' as const) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reset' as const) }) },
);

/** A store with its journal on `path`, restored from it when the file exists. */
async function openStore(path: string): Promise<{ store: SimStore; journal: StateJournal; errors: unknown[] }> {
  const store = new SimStore();
  await restoreState(store, path);
  const errors: unknown[] = [];
  // A 2 KB floor: the sequences here compact the file many times.
  const journal = new StateJournal(
    path,
    { snapshot: () => store.toState(), takeChanges: () => store.takeChanges() },
    (err) => errors.push(err),
    2_048,
  );
  await journal.open();
  return { store, journal, errors };
}

describe('the state journal', () => {
  it('restores exactly the state in memory after any sequence of changes, saves, compactions and restarts', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 80 }), async (steps) => {
        run += 1;
        const path = join(dir, `state-${run}.json`);
        let { store, journal, errors } = await openStore(path);
        let table = new IdempotencyTable(store);
        const keys: { apiKey: string; key: string; fp: string }[] = [];
        const payments: { apiKey: string; id: string }[] = [];
        const requests: ReturnType<SimStore['recordRequest']>[] = [];
        const pending: Promise<void>[] = [];
        const apiKeyOf = (m: number) => `sk_test_journal_${m}`;
        const nth = <T>(list: T[], n: number): T | undefined => (list.length ? list[n % list.length] : undefined);
        const afterRun = (apiKey: string, outcome: Outcome) => {
          if (outcome.effect)
            store.recordEffect({
              api_key: apiKey,
              operation: outcome.effect.operation,
              idempotency_key: null,
              reference: outcome.effect.payment.reference,
              payment_id: outcome.effect.payment.id,
              amount: outcome.effect.amount,
              at: store.nowS(),
            });
        };
        for (const s of steps) {
          switch (s.op) {
            case 'create': {
              const apiKey = apiKeyOf(s.merchant);
              const key = newKey();
              const claim = table.claim(apiKey, key, `fp-${key}`, store.merchant(apiKey).key_ttl_s);
              const token = { card: 'pm_card_visa', decline: 'pm_decline_insufficient_funds', '3ds': 'pm_3ds' }[
                s.method
              ];
              const body = {
                amount: s.amount,
                currency: 'EUR',
                reference: `order_${key}`,
                payment_method: token,
                capture: s.manual ? ('manual' as const) : ('automatic' as const),
              };
              const outcome = createPayment(store, apiKey, key, body, (id) => `http://sim/${id}`);
              if (claim.kind === 'new')
                table.complete(claim, { status: outcome.reply.status, body: outcome.reply.body });
              const id = (outcome.reply.body as { id?: string }).id;
              if (id) payments.push({ apiKey, id });
              keys.push({ apiKey, key, fp: `fp-${key}` });
              afterRun(apiKey, outcome);
              break;
            }
            case 'repeat': {
              const k = nth(keys, s.nth);
              // A repeat of an expired key forgets its record; the new first request stores one, or fails (a fault) and
              // stores nothing.
              if (k) {
                const claim = table.claim(k.apiKey, k.key, k.fp, store.merchant(k.apiKey).key_ttl_s);
                if (claim.kind === 'new' && s.commits) table.complete(claim, { status: 409, body: { again: true } });
                else if (claim.kind === 'new') table.release(claim);
              }
              break;
            }
            case 'capture':
            case 'void':
            case 'authenticate-ok':
            case 'authenticate-failed': {
              const p = nth(payments, s.nth);
              if (!p) break;
              const outcome =
                s.op === 'capture'
                  ? capturePayment(store, p.apiKey, p.id, {})
                  : s.op === 'void'
                    ? voidPayment(store, p.apiKey, p.id)
                    : authenticatePayment(store, p.id, s.op === 'authenticate-ok' ? 'succeeded' : 'failed');
              afterRun(p.apiKey, outcome);
              break;
            }
            case 'refund': {
              const p = nth(payments, s.nth);
              if (p) afterRun(p.apiKey, refundPayment(store, p.apiKey, p.id, { amount: s.amount }));
              break;
            }
            case 'merchant':
              store.setMerchant(apiKeyOf(s.merchant), { ...store.merchant(apiKeyOf(s.merchant)), key_ttl_s: s.ttl });
              break;
            case 'advance':
              store.advanceClock(s.seconds);
              break;
            case 'request':
              requests.push(
                store.recordRequest({
                  api_key: apiKeyOf(0),
                  operation: 'lookup',
                  idempotency_key: null,
                  reference: null,
                  at: store.nowS(),
                  status: null,
                }),
              );
              break;
            case 'settle': {
              const r = nth(requests, s.nth);
              if (r) store.updateRequest(r, { status: s.status, ...(s.status === 500 ? { fault: 'status' } : {}) });
              break;
            }
            case 'save':
              await journal.save();
              break;
            case 'save-later':
              pending.push(journal.save());
              break;
            case 'restart':
              await Promise.all(pending.splice(0));
              await journal.close();
              expect(errors).toEqual([]);
              ({ store, journal, errors } = await openStore(path));
              table = new IdempotencyTable(store);
              // The live entries of the old store are gone; the restored ones are the requests from now on.
              requests.splice(0, requests.length, ...store.toState().ledger.requests);
              break;
            case 'reset':
              store.reset();
              payments.splice(0);
              keys.splice(0);
              requests.splice(0);
              break;
          }
        }
        await Promise.all(pending.splice(0));
        await journal.save();
        await journal.close();
        expect(errors).toEqual([]);
        const restored = new SimStore();
        expect(await restoreState(restored, path)).toBe(true);
        expect(normalized(restored.toState())).toEqual(normalized(store.toState()));
      }),
      {
        numRuns: 100,
        // Sequences a random search rarely meets: a key that expires (and its new first request fails) after it was
        // saved, and a request settled after it was saved.
        examples: [
          [
            [
              { op: 'create', merchant: 0, method: 'card', manual: false, amount: 100 },
              { op: 'save' },
              { op: 'merchant', merchant: 0, ttl: 1 },
              { op: 'advance', seconds: 5 },
              { op: 'repeat', nth: 0, commits: false },
            ],
          ],
          [[{ op: 'request' }, { op: 'save' }, { op: 'settle', nth: 0, status: 200 }]],
        ],
      },
    );
  });

  it('appends what one payment changed, not everything held', async () => {
    const statePath = join(dir, 'state.json');
    const sim = await startSimulator({ port: 0, statePath });
    try {
      const apiKey = newApiKey();
      for (let i = 0; i < 150; i += 1)
        await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
      const held = (await stat(statePath)).size;
      await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
      const added = (await stat(statePath)).size - held;
      // One payment, its key's stored answer, its effect and its request: about 1.3 KB, whatever is held (150
      // payments here: a whole snapshot would be over 150 KB).
      expect(added).toBeGreaterThan(0);
      expect(added).toBeLessThan(4_096);
    } finally {
      await sim.close();
    }
  });

  it('drops a last line a crash cut short, and refuses a corrupt line before it', async () => {
    const statePath = join(dir, 'state.json');
    const apiKey = newApiKey();
    const sim = await startSimulator({ port: 0, statePath });
    const created = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    await sim.close();

    await appendFile(statePath, '{"clock_offset_s":0,"se');
    const again = await startSimulator({ port: 0, statePath });
    try {
      const got = await call(again, 'GET', `/v1/payments/${String(created.body.id)}`, { apiKey });
      expect(got.status).toBe(200);
    } finally {
      await again.close();
    }

    // The restart wrote a fresh snapshot; a corrupt line with a valid one after it is damage, not a cut append.
    await appendFile(statePath, '{"clock_offset_s":0,"se\n{"clock_offset_s":0,"seq":1}\n');
    await expect(startSimulator({ port: 0, statePath })).rejects.toThrow(/journal line \d+ is not JSON/);
    expect((await readFile(statePath, 'utf8')).split('\n')[0]).toContain(String(created.body.id));
  });
});
