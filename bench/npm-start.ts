/**
 * `npm run bench:npm-start [-- N]`: issue 23's latency targets against a running `npm start` (separate processes, the
 * dev server on its state file, webhooks and key records on), where `npm run bench` runs one process on a fresh
 * in-memory server. Reads the stack file `npm start` writes (STACK_FILE, default .temporal/dev-server.stack.json) for
 * the API's address and the services' pids; charges as the dev merchant (API_TOKEN, default the development token).
 *
 * One payment at a time, N measured after 10 warm-up each (default 100): wallet-only back to back and with 100 ms
 * between payments (the previous payment's tail, its second workflow task and handoffs, then no longer shares the
 * cores), card and split back to back taking turns (their p50s compare within the run). Prints p50/p90 of the client's time to the answer and each service's CPU per
 * payment over the back-to-back wallet-only run, from /proc (its process group and its leader's children, e.g.
 * PostgreSQL's backends). Every answer must be 200 `succeeded`; anything else stops the run.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { groupCpuMs } from './resources';
import { percentile } from './stats';

interface StackFile {
  readonly apiUrls: readonly string[];
  readonly services: Record<string, { readonly pid: number }>;
}

const stackFile = process.env.STACK_FILE ?? path.join('.temporal', 'dev-server.stack.json');
const token = process.env.API_TOKEN ?? 'pw_dev_token_change_me';
const measured = Number(process.argv[2] ?? 100);
const warmUp = 10;
const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as StackFile;
const api = stack.apiUrls[0] ?? 'http://127.0.0.1:3000';
const run = Date.now().toString(36);
const headers = (key: string) => ({
  authorization: `Bearer ${token}`,
  'content-type': 'application/json',
  'idempotency-key': key,
});

/** Each service's CPU so far (its process group, as the supervisor starts it, with its leader's live children). */
const cpuByService = (): Record<string, number> =>
  Object.fromEntries(Object.entries(stack.services).map(([name, { pid }]) => [name, groupCpuMs(new Set([pid]))]));

async function post(url: string, key: string, body: unknown): Promise<string> {
  const res = await fetch(`${api}${url}`, { method: 'POST', headers: headers(key), body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text}`);
  return text;
}

type Kind = 'wallet' | 'card' | 'split';

/**
 * N payments of each kind one at a time (after the warm-up), the kinds taking turns (card, split, card, ...): each
 * kind's payments meet the same machine and the same state file, so their p50s compare within the run. The client's
 * milliseconds to each answer, sorted, per kind.
 */
async function payments(kinds: readonly Kind[], walletId: string, gapMs: number): Promise<number[][]> {
  const times: number[][] = kinds.map(() => []);
  for (let i = 0; i < warmUp + measured; i++) {
    for (const [k, kind] of kinds.entries()) {
      const body = {
        orderId: `bench-${run}-${kind}-${gapMs}-${i}`,
        amount: { value: 1_000, currency: 'EUR' },
        paymentMethod: 'pm_card_visa',
        ...(kind === 'card' ? {} : { wallet: { walletId, amount: kind === 'wallet' ? 1_000 : 400 } }),
      };
      const started = performance.now();
      const answer = await post('/v1/payments', `bench-${run}-${kind}-${gapMs}-${i}`, body);
      const ms = performance.now() - started;
      if (!answer.includes('"status":"succeeded"')) throw new Error(`a ${kind} payment did not succeed: ${answer}`);
      if (i >= warmUp) times[k]?.push(ms);
      if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
    }
  }
  return times.map((t) => t.sort((a, b) => a - b));
}

const line = (label: string, t: readonly number[]): string =>
  `${label.padEnd(34)} p50 ${percentile(t, 50).toFixed(1).padStart(6)} ms   p90 ${percentile(t, 90).toFixed(1).padStart(6)} ms`;

async function main(): Promise<void> {
  const walletId = `bench-${run}`;
  await post(`/v1/wallets/${walletId}/credits`, `credit-${run}`, { amount: { value: 100_000_000, currency: 'EUR' } });
  console.log(`npm start at ${api}: ${measured} payments one at a time per line, after ${warmUp} warm-up`);
  const before = cpuByService();
  const walletBackToBack = (await payments(['wallet'], walletId, 0))[0] ?? [];
  const after = cpuByService();
  console.log(line('wallet-only, back to back', walletBackToBack));
  const cpu = Object.keys(before).map(
    (name) => `${name} ${(((after[name] ?? 0) - (before[name] ?? 0)) / (warmUp + measured)).toFixed(1)}`,
  );
  console.log(`  CPU ms per wallet-only payment: ${cpu.join(', ')}`);
  console.log(line('wallet-only, 100 ms between', (await payments(['wallet'], walletId, 100))[0] ?? []));
  const [card = [], split = []] = await payments(['card', 'split'], walletId, 0);
  console.log(line('card, back to back (taking turns)', card));
  console.log(line('split (400 of 1000 from the wallet)', split));
  console.log(`split adds ${(percentile(split, 50) - percentile(card, 50)).toFixed(1)} ms p50 to a card payment`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
