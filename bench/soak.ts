/**
 * `npm run soak`: a chaos soak against a running stack, `npm run cluster` (default) or `npm start` (`--dev`).
 *
 * Load: SOAK_PAYMENTS payments (default 300) at SOAK_RATE per second (default 2), half automatic and half manual
 * capture, 3 % declined; captures (full or partial) of manual ones, partial refunds of a third; each HTTP call to one
 * of the stack's APIs, a dropped connection or a 503 repeated with the same key (on the other API), a 202 followed
 * until it settled. Split payments (issue 23): SOAK_WALLET_SHARE of the scenarios (default 0.18; 0: none) are automatic
 * ones with a wallet part, a third wallet-only, the others split with the card (10 % declined by it), on four wallets
 * credited up front through the API: a hot one (half of them, concurrent holds, credited for 70 % of them: its last
 * ones decline `wallet_insufficient_funds`), two ample ones, one short of funds; a third refunded partially (wallet
 * first) once the wallet part is captured.
 * Faults: the simulator fails 5 % of calls with commit_then_drop, 5 % with 503 + Retry-After, 2 % with 429, 1 % with
 * reset_before_commit, and duplicates and reorders webhooks 10 % of the time; SIGKILL of a random worker every 30-60 s
 * (the supervisor restarts it); on the cluster one Temporal server restart, one PostgreSQL immediate shutdown (SIGQUIT
 * to the postmaster at 45 % of the load: crash recovery at the supervisor's restart; Temporal's store and the wallets'
 * at once), one Redis restart; one API process killed (restarted by the supervisor). Issue 19's adversaries
 * (bench/soak-adversaries.ts): a rolling deploy of the workers into other `PROVIDER_*` settings (15 % of the load),
 * every worker killed in the middle of local first creates and a provider outage of SOAK_OUTAGE_MS right after (40 %),
 * one 429 with a Retry-After of SOAK_RETRY_AFTER_S (65 %); an operator resolves every review from the provider's
 * ledger as soon as the soak sees it (racing webhooks and reconciles; one verdict in five on a capture or refund is a
 * careless "succeeded") and after quiescence; 5 % of the payments, once settled, are repeated while a new key of their
 * order is pending. Order races (SOAK_ORDER_RACE_SHARE, default 5 % of the card scenarios): two new keys of one order
 * sent at the same instant, one to each API process, while the order's creates linger: one takes the order, the
 * other is 409 naming it (both taking it counts as a double; `orderRace`).
 * Quiescence: every charge still unanswered (a 5xx, or no answer) is repeated, same key and body; then views are read,
 * SOAK_READ_CONCURRENCY (default 8) at once, until nothing moves or the window ended.
 * Quiescence also waits until every wallet part followed its payment's end (captured or released).
 * Verdict: after quiescence, the money invariant (bench/money-invariant.ts) over the answers, the views and the
 * simulator's ledger (bench/soak-check.ts; a payment with a wallet part by its card side), and the wallets: every
 * wallet credited and its entries read through the API and held with the views and the ledger to the wallet rules
 * (bench/soak-wallets.ts over bench/wallet-invariants.ts: balances are their entries, each part held once and captured
 * or released once as its payment ended, wallet refunds first and within the part, no provider call of a wallet-only
 * payment, a split's card charged the rest only; a double in D, the rest in M), and the key records: the charge of
 * every payment that ended answered and every succeeded capture and refund has its row in `key_records`
 * (bench/soak-key-records.ts; one missing counts in M). It prints throughput, latency percentiles, recovery after each
 * fault, the wallet payments and the wallet verdict, and last
 * `soak: <N> payments, <D> double effects, <S> stuck, <M> mismatches`; exit 0 only when D, S and M are 0.
 */
import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { Connection } from '@temporalio/client';
import { loadConfig } from '../src/config';
import { mulberry32 } from '../src/simulator/faults';
import type { Ledger } from '../src/simulator/server';
import { DEFAULT_CACHE_DIR } from '../scripts/lib/temporal-binaries';
import { databaseUrl, postgresAnswers } from '../scripts/lib/postgres';
import { PAYMENTS_DATABASE } from '../scripts/lib/payments-database';
import { providerIdempotencyKey } from '../src/activities/keys';
import { type InvariantView, invariantAnswer } from './money-invariant';
import {
  type SoakAnswer,
  type SoakPayment,
  type SoakView,
  chargeAnswers,
  checkSoak,
  neverStarted,
  stateOf,
} from './soak-check';
import { forEachBounded } from './bounded';
import { type ClientAnswer, expectedKeyScopes, keyRecordsUnlikeAnswers, missingKeyRecords } from './soak-key-records';
import { type SoakControls, longRetryAfter, outageAfterCrash, rollingDeploy, setFaults } from './soak-adversaries';
import { chargeWorkflowId } from '../src/domain/ids';
import { formatWait } from '../src/domain/summaries';
import { defaultPaymentTimings } from '../src/domain/workflow-inputs';
import { AmbiguityTally, ambiguityByKindLine, ambiguityLine } from './soak-ambiguity';
import { describeQuiescenceWindow, quiescenceWindow } from './soak-quiescence';
import { summarize } from './stats';
import {
  type SoakCredit,
  type SoakWalletEntry,
  type SoakWalletPart,
  type SoakWalletPayment,
  type SoakWalletRead,
  checkSoakWallets,
  ledgerEntriesOf,
  walletSummaryLine,
} from './soak-wallets';
import type { WalletCaseView } from './wallet-invariants';

const dev = process.argv.includes('--dev');
const N = Number(process.env.SOAK_PAYMENTS ?? 300);
const RATE = Number(process.env.SOAK_RATE ?? 2);
const SEED = Number(process.env.SOAK_SEED ?? 42);
/** An explicit quiescence window; by default it is derived from the workers' budgets and schedule (soak-quiescence). */
const QUIESCE_OVERRIDE_MS = process.env.SOAK_QUIESCE_MS ? Number(process.env.SOAK_QUIESCE_MS) : undefined;
/** How long one read of a view during quiescence repeats a 503: a payment that keeps answering 503 stalls no pass. */
const QUIESCENCE_READ_MS = 10_000;
/** How many views the quiescence passes read at once, and how many unanswered charges it repeats at once. */
const READ_CONCURRENCY = Number(process.env.SOAK_READ_CONCURRENCY ?? 8);
/** How long one payment's scenario may take before the soak stops driving it (the verdict still reads it). */
const SCENARIO_LIMIT_MS = Number(process.env.SOAK_SCENARIO_LIMIT_MS ?? 180_000);
/** The provider outage: longer than every retry budget of the workers (production's: 2-10 min; the CI cluster's less). */
const OUTAGE_MS = Number(process.env.SOAK_OUTAGE_MS ?? 300_000);
/** The Retry-After of the one long 429 (issue 19 saw a capture held for 180 s). */
const RETRY_AFTER_S = Number(process.env.SOAK_RETRY_AFTER_S ?? 180);
/** The share of the scenarios that pay with a wallet part (issue 23; a third of them wallet-only); 0: none. */
const WALLET_SHARE = Number(process.env.SOAK_WALLET_SHARE ?? 0.18);
/** The share of the card scenarios that first race two keys of a new order on two APIs (orderRace); 0: none. */
const ORDER_RACE_SHARE = Number(process.env.SOAK_ORDER_RACE_SHARE ?? 0.05);
const stackFile =
  process.env.SOAK_STACK_FILE ??
  (dev ? path.join(DEFAULT_CACHE_DIR, 'dev-server.stack.json') : path.join(DEFAULT_CACHE_DIR, 'cluster', 'stack.json'));

interface StackInfo {
  readonly kind: 'dev' | 'cluster';
  readonly temporalAddress: string;
  readonly simulatorUrl: string;
  readonly apiUrls: readonly string[];
  readonly providerApiKey?: string;
  /** `host:port` of the cluster's PostgreSQL (Temporal's store and the wallets'). */
  readonly postgres?: string;
  /** The payments database (wallets, key records) of `npm start`. */
  readonly databaseUrl?: string;
  readonly workerEnvFile?: string;
  readonly services: Record<string, { pid?: number; state: string; restarts: number }>;
}

const readStack = (): StackInfo => JSON.parse(readFileSync(stackFile, 'utf8')) as StackInfo;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const t0 = Date.now();
const at = () => `t+${((Date.now() - t0) / 1000).toFixed(0)}s`;
const log = (line: string): void => {
  process.stdout.write(`[soak ${at()}] ${line}\n`);
};

const random = mulberry32(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;

// ---------------------------------------------------------------------------------------------------------------
// HTTP against the APIs: a dropped connection or a 503 is repeated (same key) on the next API, bounded.

const config = loadConfig();
const quiescence = quiescenceWindow(config);
const QUIESCE_MS = QUIESCE_OVERRIDE_MS ?? quiescence.ms;
const [merchant] = config.API_TOKENS;
if (!merchant) throw new Error('no API token configured');
const [operator] = config.OPERATOR_TOKENS;
let stack = readStack();

interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly ms: number;
}

const latencies: Record<string, number[]> = {
  charge: [],
  capture: [],
  refund: [],
  get: [],
  resolve: [],
  credit: [],
  wallet: [],
};
let httpErrors = 0;
let retried503 = 0;
const other5xx: string[] = [];
let apiTurn = 0;

async function call(
  kind: keyof typeof latencies,
  method: string,
  urlPath: string,
  opts: { key?: string; body?: unknown; token?: string; repeatForMs?: number } = {},
): Promise<Reply> {
  const deadline = Date.now() + (opts.repeatForMs ?? 120_000);
  for (let attempt = 0; ; attempt++) {
    const base = stack.apiUrls[apiTurn++ % stack.apiUrls.length] as string;
    const started = Date.now();
    try {
      const res = await fetch(`${base}${urlPath}`, {
        method,
        headers: {
          authorization: `Bearer ${opts.token ?? merchant!.token}`,
          ...(opts.key === undefined ? {} : { 'idempotency-key': opts.key }),
          ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      const ms = Date.now() - started;
      if (res.status === 503 && Date.now() < deadline) {
        retried503 += 1;
        await sleep(Number(res.headers.get('retry-after') ?? 1) * 1_000);
        continue;
      }
      if (res.status >= 500 && Date.now() < deadline) {
        // Not a promised answer (a 503 is): counted and reported; repeated with the same key, as an order service would.
        other5xx.push(`${method} ${urlPath.replace(/\/v1\/payments\/[^/]+/, '/v1/payments/:key')} ${res.status}`);
        await sleep(1_000);
        continue;
      }
      latencies[kind]?.push(ms);
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, ms };
    } catch (err) {
      httpErrors += 1;
      if (Date.now() > deadline) throw err;
      await sleep(Math.min(2_000, 200 * 2 ** Math.min(attempt, 4)));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One payment's scenario.

const payments: SoakPayment[] = [];
const answers: SoakAnswer[] = [];
/** Every charge's 200 as its client got it, whole: held against its key's record in the verdict. */
const chargeBodies: ClientAnswer[] = [];
const settleMs: number[] = [];
let completedScenarios = 0;
let scenariosStarted = 0;
let firstSuccessAfter: { at: number; resolve: (t: number) => void }[] = [];

function noteSuccess() {
  const now = Date.now();
  const waiting = firstSuccessAfter.filter((w) => w.at <= now);
  firstSuccessAfter = firstSuccessAfter.filter((w) => w.at > now);
  for (const w of waiting) w.resolve(now);
}

/** Resolves at the first payment confirmed (200) after now. */
function nextSuccess(): Promise<number> {
  return new Promise((resolve) => firstSuccessAfter.push({ at: Date.now(), resolve }));
}

type View = Record<string, unknown> & {
  status?: string;
  amountAuthorized?: number;
  amountCaptured?: number;
  amountRefunded?: number;
  operations?: { kind: string; key: string; state: string }[];
  wallet?: { walletId: string; amount: number; status: string; refunded: number };
};

/** The workers' reconcile schedule, and production's when it differs (the ambiguity numbers depend on it). */
function scheduleShape(): string {
  const shape = (ms: readonly number[]) => ms.map((x) => formatWait(x)).join(', ');
  const ours = shape(config.timings.reconcileScheduleMs);
  const production = shape(defaultPaymentTimings.reconcileScheduleMs);
  return ours === production ? `${ours}, production's` : `${ours}; production's: ${production}`;
}

/** Unknown outcomes and their time to final, from every view and answer the soak reads (issue 21 §4). */
const ambiguity = new AmbiguityTally();

async function viewOf(key: string): Promise<View | undefined> {
  const r = await call('get', 'GET', `/v1/payments/${encodeURIComponent(key)}`);
  if (r.status !== 200) return undefined;
  ambiguity.observe(key, r.body as View, Date.now());
  return r.body as View;
}

/**
 * A payment's view for the verdict, or what its API answered instead: a payment whose every read answers 503 (a
 * workflow task that keeps failing answers its queries so) is named by that answer, not "not found".
 */
async function verdictViewOf(key: string): Promise<SoakView> {
  const r = await call('get', 'GET', `/v1/payments/${encodeURIComponent(key)}`, { repeatForMs: QUIESCENCE_READ_MS });
  if (r.status === 200) {
    ambiguity.observe(key, r.body as View, Date.now());
    return r.body as SoakView;
  }
  const type = (r.body.error as { type?: string } | undefined)?.type;
  const repeated = r.status === 503 ? ` for ${QUIESCENCE_READ_MS / 1000} s` : '';
  return { error: r.status === 404 ? 'not found' : `GET answered ${r.status}${type ? ` ${type}` : ''}${repeated}` };
}

/** Follows a 202 until the payment (or its operation) settled, bounded. */
async function follow(key: string, until: (v: View) => boolean, limitMs: number): Promise<View | undefined> {
  const deadline = Date.now() + limitMs;
  let delay = 250;
  while (Date.now() < deadline) {
    const v = await viewOf(key).catch(() => undefined);
    if (v && until(v)) return v;
    await sleep(delay);
    delay = Math.min(3_000, delay * 1.5);
  }
  return undefined;
}

const record = (payment: string, kind: SoakAnswer['kind'], opKey: string, amount: number | undefined, r: Reply) => {
  const {
    merchantId: _m,
    paymentKey: _p,
    ...answer
  } = invariantAnswer(
    { merchantId: merchant!.merchantId, paymentKey: payment, kind, opKey, amount, status: r.status },
    r.body,
  );
  answers.push({ payment, ...answer });
  if (r.status === 200) noteSuccess();
  if (r.status === 200 && kind === 'charge')
    chargeBodies.push({ scope: chargeWorkflowId(merchant!.merchantId, payment), body: r.body });
};

async function moveMoney(
  p: SoakPayment,
  kind: 'capture' | 'refund',
  opKey: string,
  amount: number | undefined,
  deadline: number,
): Promise<boolean> {
  const urlPath = `/v1/payments/${encodeURIComponent(p.key)}/${kind === 'capture' ? 'capture' : 'refunds'}`;
  const body = amount === undefined ? {} : { amount };
  for (;;) {
    const r = await call(kind, 'POST', urlPath, { key: opKey, body });
    const error = (r.body.error as { type?: string } | undefined)?.type;
    if (r.status === 409 && error === 'operation_in_flight' && Date.now() < deadline) {
      await sleep(1_000); // another operation of this payment is being reconciled: repeat once it settled
      continue;
    }
    record(p.key, kind, opKey, amount, r);
    ambiguity.movementAnswered(p.key, kind, opKey, r.status, Date.now());
    if (r.status === 200) return true;
    if (r.status !== 202) return false;
    const done = await follow(
      p.key,
      (v) => (v.operations ?? []).some((o) => o.kind === kind && o.key === opKey && o.state !== 'running'),
      Math.max(1_000, deadline - Date.now()),
    );
    const op = done?.operations?.find((o) => o.kind === kind && o.key === opKey);
    if (done && op?.state === 'needs_review') await resolveReview(p, done);
    return op?.state === 'succeeded';
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The operator: resolves a review from the provider's ledger the moment the soak sees it, while webhooks are delivered.

let reviewsResolved = 0;
const resolveAnswers: string[] = [];
/** The views an operator resolved, by payment: the verdict holds them too (a review may have been no review at all). */
const reviewedViews = new Map<string, SoakView[]>();

async function ledgerEffects(): Promise<Ledger['effects']> {
  const apiKey = stack.providerApiKey ?? config.PROVIDER_API_KEY;
  return ((await simulator(`/_sim/ledger?api_key=${encodeURIComponent(apiKey)}`)) as Ledger).effects;
}

/**
 * An operator's truthful verdict: the operation under review happened iff the provider has an effect under its key;
 * a create under review happened iff the provider has its create (named by its provider payment).
 */
async function resolveReview(p: SoakPayment, view: View): Promise<View | undefined> {
  if (!operator) return undefined;
  reviewedViews.set(p.key, [...(reviewedViews.get(p.key) ?? []), view as SoakView]);
  const effects = await ledgerEffects();
  const has = (op: 'create' | 'capture' | 'refund' | 'void', key: string) =>
    effects.find(
      (e) => e.operation === op && e.idempotency_key === providerIdempotencyKey(merchant!.merchantId, op, key),
    );
  const op = view.operations?.find((o) => o.state === 'needs_review');
  let body: { outcome: 'succeeded' | 'failed'; providerPaymentId?: string; note: string };
  if (op && (op.kind === 'capture' || op.kind === 'refund') && random() < 0.2) {
    // A careless operator: "it went through", naming this payment's provider payment. The payment must still end with
    // the provider's amounts, whatever the verdict (issue 19, defect 3).
    const id = typeof view.providerPaymentId === 'string' ? view.providerPaymentId : undefined;
    body = { outcome: 'succeeded', ...(id ? { providerPaymentId: id } : {}), note: 'soak: mistaken, did not look' };
  } else if (op && (op.kind === 'capture' || op.kind === 'refund')) {
    body = { outcome: has(op.kind, op.key) ? 'succeeded' : 'failed', note: `soak: ${op.kind} in the ledger?` };
  } else if (op) {
    const voided = effects.some((e) => e.operation === 'void' && e.payment_id === view.providerPaymentId);
    body = { outcome: voided ? 'succeeded' : 'failed', note: 'soak: void in the ledger?' };
  } else {
    const created = has('create', p.key);
    body = created
      ? { outcome: 'succeeded', providerPaymentId: created.payment_id, note: 'soak: create in the ledger' }
      : { outcome: 'failed', note: 'soak: no create in the ledger' };
  }
  const path = `/v1/payments/${encodeURIComponent(p.key)}/resolve?merchantId=${merchant!.merchantId}`;
  const [r] = await Promise.all([
    call('resolve', 'POST', path, { body, token: operator.token }),
    simulator('/_sim/webhooks/flush', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }).catch(() => undefined),
  ]);
  resolveAnswers.push(`resolve ${r.status}`);
  log(
    `operator: ${p.key} ${op ? `${op.kind} ${op.key}` : 'create'} in review -> ${body.note}, ${body.outcome}: ${r.status}`,
  );
  if (r.status !== 200) return undefined;
  reviewsResolved += 1;
  ambiguity.operatorResolved(p.key, op && { kind: op.kind, key: op.key });
  ambiguity.observe(p.key, r.body as View, Date.now());
  return r.body as View;
}

// ---------------------------------------------------------------------------------------------------------------
// Wallets (issue 23): a few, credited up front through the API; one hot (half the wallet payments, concurrent holds,
// funded for 70 % of them), one short of funds (most of its payments decline `wallet_insufficient_funds`).

interface SoakWallet {
  readonly id: string;
  /** Its share of the wallet payments. */
  readonly weight: number;
  readonly funding: number;
}

/** The wallets the payments use; empty when wallet payments are off (SOAK_WALLET_SHARE=0, or the APIs have none). */
let wallets: SoakWallet[] = [];
/** Every credit asked (and its last answer): the verdict reads every wallet credited. */
const credits: SoakCredit[] = [];
/** A wallet part's mean: wallet-only a third of the time (5,500 on average), else 20-80 % of the amount. */
const MEAN_WALLET_PART = (5_500 + 2 * 0.5 * 5_500) / 3;

function walletPlan(): SoakWallet[] {
  const demand = (weight: number) => Math.round(N * WALLET_SHARE * weight * MEAN_WALLET_PART);
  const id = (name: string) => `soak-${SEED}-${t0}-${name}`;
  return [
    { id: id('hot'), weight: 0.5, funding: Math.max(10_000, Math.round(demand(0.5) * 0.7)) },
    { id: id('a'), weight: 0.2, funding: Math.max(10_000, 2 * demand(0.2)) },
    { id: id('b'), weight: 0.2, funding: Math.max(10_000, 2 * demand(0.2)) },
    { id: id('short'), weight: 0.1, funding: 4_000 },
  ];
}

/** Credits the plan's wallets (each under its own Idempotency-Key); wallet payments only when every credit took. */
async function fundWallets(): Promise<void> {
  if (!(WALLET_SHARE > 0)) return log('wallets: none (SOAK_WALLET_SHARE=0)');
  const plan = walletPlan();
  for (const w of plan) {
    const key = `${w.id}-funding`;
    const r = await call('credit', 'POST', `/v1/wallets/${encodeURIComponent(w.id)}/credits`, {
      key,
      body: { amount: { value: w.funding, currency: 'EUR' }, reason: 'soak funding' },
    });
    credits.push({ walletId: w.id, key, amount: w.funding, status: r.status });
    if (r.status !== 200) {
      const why = JSON.stringify(r.body).slice(0, 200);
      return log(`wallets: crediting ${w.id} answered ${r.status} ${why}; no wallet payments (no DATABASE_URL?)`);
    }
  }
  wallets = plan;
  log(
    `wallets: ${Math.round(WALLET_SHARE * 100)} % of the scenarios pay with a wallet part (a third wallet-only), on ` +
      plan.map((w) => `${w.id} (${Math.round(w.weight * 100)} %, credited ${w.funding})`).join(', '),
  );
}

function pickWallet(): SoakWallet {
  let r = random();
  for (const w of wallets) if ((r -= w.weight) < 0) return w;
  return wallets.at(-1) as SoakWallet;
}

/** One wallet as the API shows it after quiescence, with every entry (oldest first), or why it could not be read. */
async function readWallet(walletId: string): Promise<SoakWalletRead> {
  const base = `/v1/wallets/${encodeURIComponent(walletId)}`;
  const w = await call('wallet', 'GET', base);
  if (w.status !== 200) return { walletId, wallet: { error: `GET ${base} answered ${w.status}` }, entries: [] };
  const entries: SoakWalletEntry[] = [];
  for (let token: string | undefined, first = true; first || token !== undefined; first = false) {
    const page = await call('wallet', 'GET', `${base}/entries?pageSize=100${token ? `&pageToken=${token}` : ''}`);
    if (page.status !== 200) return { walletId, wallet: { error: `its entries answered ${page.status}` }, entries };
    entries.push(...(page.body.entries as SoakWalletEntry[]));
    token = page.body.nextPageToken as string | undefined;
  }
  return { walletId, wallet: { balance: Number(w.body.balance), held: Number(w.body.held) }, entries };
}

/** The soak's payments with a wallet part as they ended, and how many of them were refused (4xx, nothing started). */
function walletPaymentsOf(views: ReadonlyMap<string, SoakView>): { ended: SoakWalletPayment[]; refused: number } {
  const charges = chargeAnswers(answers);
  const withWallet = payments.filter((p) => p.wallet !== undefined);
  const ended = withWallet
    .filter((p) => stateOf(charges, p.key) !== 'refused')
    .map((p) => {
      const v = views.get(p.key);
      const refunds = new Map(
        answers.filter((a) => a.payment === p.key && a.kind === 'refund').map((a) => [a.opKey, a.amount ?? 0]),
      );
      return {
        key: p.key,
        total: p.amount,
        wallet: p.wallet as SoakWalletPart,
        view: v === undefined || 'error' in v ? undefined : (v as unknown as WalletCaseView),
        refunds: [...refunds].map(([key, amount]) => ({ key, amount })),
      };
    });
  return { ended, refused: withWallet.length - ended.length };
}

// ---------------------------------------------------------------------------------------------------------------
// One payment's scenario.

/**
 * A settled payment's exact repeat while a new key of its order is pending (its create held at the provider longer
 * than the API's first wait): the repeat answers the payment's own first answer (issue 19, defect 7).
 */
async function repeatWhileOrderOpen(p: SoakPayment, deadline: number): Promise<void> {
  const rule = { match: { operation: 'create', reference: p.orderId }, fault: 'latency', latency_ms: 10_000, times: 1 };
  await simulator('/_sim/faults', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ rules: [rule] }),
  });
  const second: SoakPayment = { ...p, key: `${p.key}-again` };
  payments.push(second);
  const r2 = await call('charge', 'POST', '/v1/payments', { key: second.key, body: chargeBody(second) });
  record(second.key, 'charge', second.key, second.amount, r2);
  const repeat = await call('charge', 'POST', '/v1/payments', { key: p.key, body: chargeBody(p) });
  record(p.key, 'charge', p.key, p.amount, repeat);
  if (r2.status === 202)
    await follow(second.key, (v) => v.status !== 'pending' && v.status !== 'unknown', deadline - Date.now());
}

/** What the order races found (bench/soak.ts `orderRace`). */
const orderRaces = { run: 0, oneTook: 0, undecided: 0, bothTook: [] as string[], misnamed: [] as string[] };

/**
 * Two new keys for one order sent at the same instant, one to each API process (SOAK_ORDER_RACE_SHARE of the
 * scenarios), while the order's creates linger 10 s at the provider (the payment that takes the order stays open
 * meanwhile): exactly one key takes the order (200 or 202) and the other is 409 `payment_in_flight` naming it. Each
 * key is sent once, straight to its API: an answer lost to the chaos (a 5xx, a dropped connection) leaves the race
 * undecided (counted; quiescence repeats that charge like any other). Both taking it within 8 s, while the first's
 * create still lingered, is a double charge of the order.
 */
async function orderRace(p: SoakPayment): Promise<void> {
  const orderId = `${p.orderId}-race`;
  const rule = { match: { operation: 'create', reference: orderId }, fault: 'latency', latency_ms: 10_000, times: 2 };
  await simulator('/_sim/faults', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ rules: [rule] }),
  });
  const racers: SoakPayment[] = [0, 1].map((i) => ({
    key: `${p.key}-race${i}`,
    orderId,
    amount: p.amount,
    capture: 'automatic',
    declines: false,
  }));
  payments.push(...racers);
  orderRaces.run += 1;
  const sent = Date.now();
  const replies = await Promise.all(
    racers.map(async (r, i) => {
      const base = stack.apiUrls[i % stack.apiUrls.length] as string;
      try {
        const res = await fetch(`${base}/v1/payments`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${merchant!.token}`,
            'idempotency-key': r.key,
            'content-type': 'application/json',
          },
          body: JSON.stringify(chargeBody(r)),
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        const reply: Reply = {
          status: res.status,
          body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
          ms: Date.now() - sent,
        };
        record(r.key, 'charge', r.key, r.amount, reply);
        return reply;
      } catch {
        httpErrors += 1;
        return undefined;
      }
    }),
  );
  const took = replies.flatMap((r, i) => (r !== undefined && (r.status === 200 || r.status === 202) ? [i] : []));
  const inFlight = replies.flatMap((r, i) =>
    r?.status === 409 && (r.body.error as { type?: unknown } | undefined)?.type === 'payment_in_flight' ? [i] : [],
  );
  if (took.length === 2 && replies.every((r) => r !== undefined && r.ms < 8_000)) {
    orderRaces.bothTook.push(orderId);
  } else if (took.length === 1 && inFlight.length === 1) {
    orderRaces.oneTook += 1;
    const named = (replies[inFlight[0] as number]?.body.error as { paymentKey?: unknown } | undefined)?.paymentKey;
    if (named !== racers[took[0] as number]?.key) orderRaces.misnamed.push(`${orderId} (409 named ${String(named)})`);
  } else {
    orderRaces.undecided += 1;
  }
}

const chargeBody = (p: SoakPayment) => ({
  orderId: p.orderId,
  amount: { value: p.amount, currency: 'EUR' },
  paymentMethod: p.declines ? 'pm_decline_insufficient_funds' : 'pm_card_visa',
  capture: p.capture,
  ...(p.wallet === undefined ? {} : { wallet: p.wallet }),
});

/** A payment's wallet part has followed its end: captured or released (not `held` once it succeeded or did not). */
const walletSettled = (v: Pick<View, 'status' | 'wallet'>): boolean =>
  v.wallet?.status !== 'held' || !['succeeded', 'declined', 'failed', 'voided'].includes(String(v.status));

async function scenario(i: number): Promise<void> {
  const key = `soak-${SEED}-${t0}-${i}`;
  // A wallet part (automatic capture only): a third wallet-only, the others split with the card (10 % declined by it).
  const wallet = wallets.length > 0 && random() < WALLET_SHARE ? pickWallet() : undefined;
  const walletOnly = wallet !== undefined && random() < 1 / 3;
  const capture = wallet !== undefined || random() < 0.5 ? 'automatic' : 'manual';
  const declines = !walletOnly && random() < (wallet ? 0.1 : 0.03);
  const amount = 1_000 + Math.floor(random() * 9_000);
  const part = walletOnly ? amount : Math.max(1, Math.floor(amount * (0.2 + 0.6 * random())));
  const p: SoakPayment = {
    key,
    orderId: `order-${key}`,
    amount,
    capture,
    declines,
    ...(wallet === undefined ? {} : { wallet: { walletId: wallet.id, amount: part } }),
  };
  const wantCapture = random() < 0.85;
  const partialCapture = random() < 0.4;
  const wantRefund = random() < 0.35;
  const repeatLater = random() < 0.05;
  const raceOrder = wallet === undefined && random() < ORDER_RACE_SHARE;
  payments.push(p);
  if (raceOrder) await orderRace(p);
  const deadline = Date.now() + SCENARIO_LIMIT_MS;
  const started = Date.now();
  const charge = await call('charge', 'POST', '/v1/payments', { key, body: chargeBody(p) });
  record(key, 'charge', key, amount, charge);
  let view: View | undefined = charge.body as View;
  if (charge.status === 202) {
    view = await follow(key, (v) => v.status !== 'pending' && v.status !== 'unknown', deadline - Date.now());
  } else if (charge.status !== 200) {
    // Refused (4xx): nothing started. Anything else is unanswered: quiescence repeats it (repeatUnansweredCharges).
    return;
  }
  if (view?.status === 'needs_review') view = await resolveReview(p, view);
  if (!view) return;
  settleMs.push(Date.now() - started);
  if (repeatLater && view.status !== 'needs_review') await repeatWhileOrderOpen(p, deadline);
  let captured = view.status === 'succeeded' ? (view.amountCaptured ?? 0) : 0;
  if (p.wallet !== undefined && view.status === 'succeeded') {
    // Its wallet part is captured moments after the answer; refunds then go to the wallet first (until then the card's
    // part alone is refundable). The wallet's share counts as captured too.
    const settled = walletSettled(view) ? view : await follow(key, walletSettled, deadline - Date.now());
    captured = settled?.wallet?.status === 'captured' ? amount : 0;
  }
  if (view.status === 'authorized' && wantCapture) {
    const captureAmount = partialCapture ? Math.max(1, Math.floor(amount * 0.6)) : undefined;
    if (await moveMoney(p, 'capture', `${key}-cap`, captureAmount, deadline)) captured = captureAmount ?? amount;
  }
  if (captured > 0 && wantRefund) {
    const first = Math.max(1, Math.floor(captured / 3));
    if (await moveMoney(p, 'refund', `${key}-ref1`, first, deadline)) {
      if (random() < 0.3) await moveMoney(p, 'refund', `${key}-ref2`, Math.max(1, Math.floor(captured / 4)), deadline);
    }
  }
}

/**
 * Quiescence's first step: every charge still unanswered after the load (a 5xx after the repeats, or no answer at all;
 * soak-check's chargeState) is repeated as an order service would, same key and body; the answer is recorded like the
 * scenario's. A 4xx then makes the payment refused; anything else leaves it to the read passes like every payment.
 */
async function repeatUnansweredCharges(): Promise<void> {
  const charges = chargeAnswers(answers);
  const unanswered = payments.filter((p) => stateOf(charges, p.key) === 'unanswered');
  const answered: string[] = [];
  await forEachBounded(unanswered, READ_CONCURRENCY, async (p) => {
    try {
      const r = await call('charge', 'POST', '/v1/payments', { key: p.key, body: chargeBody(p) });
      record(p.key, 'charge', p.key, p.amount, r);
      answered.push(String(r.status));
    } catch (err) {
      answered.push(`no answer (${err instanceof Error ? err.name : 'error'})`);
    }
  });
  const byStatus = counts(answered)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status} x ${n}`);
  log(
    `unanswered charges repeated (same key and body): ${unanswered.length}${byStatus.length ? `: ${byStatus.join(', ')}` : ''}`,
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Faults.

interface FaultRecord {
  readonly fault: string;
  readonly at: number;
  backMs?: number;
  firstSuccessMs?: number;
  note?: string;
}
const faults: FaultRecord[] = [];

async function simulator(pathname: string, init?: RequestInit): Promise<unknown> {
  const res = await fetch(`${stack.simulatorUrl}${pathname}`, { ...init, signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`simulator ${pathname}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Webhooks duplicated and delivered in reverse batches during 10 % of the time: one second in every ten. */
async function webhookChaos(stop: () => boolean): Promise<void> {
  const apiKey = stack.providerApiKey ?? config.PROVIDER_API_KEY;
  const merchantPath = `/_sim/merchants/${encodeURIComponent(apiKey)}`;
  const normal = (await simulator(merchantPath)) as Record<string, unknown>;
  const set = (chaos: boolean) =>
    simulator(merchantPath, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(
        chaos ? { ...normal, webhook_duplicate: true, webhook_reorder: true, webhook_delay_ms: 300 } : normal,
      ),
    });
  try {
    while (!stop()) {
      await sleep(9_000);
      if (stop()) break;
      await set(true).catch(() => undefined);
      await sleep(1_000);
      await set(false).catch(() => undefined);
    }
  } finally {
    await set(false).catch(() => undefined);
  }
}

function counts(xs: readonly string[]): [string, number][] {
  const m = new Map<string, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return [...m];
}

function kill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Kills a supervised service and measures until the supervisor has it running again under a new pid (and `ready`
 * says it serves); answers the fault's record (undefined: skipped).
 */
async function killService(
  fault: string,
  name: string,
  signal: NodeJS.Signals,
  ready?: () => Promise<boolean>,
): Promise<FaultRecord | undefined> {
  let before: StackInfo['services'][string] | undefined;
  try {
    before = readStack().services[name];
  } catch (err) {
    log(`${fault}: the stack file cannot be read (${err instanceof Error ? err.message : String(err)}); skipped`);
    return undefined;
  }
  if (!before?.pid) {
    log(`${fault}: no ${name} in ${stackFile}; skipped`);
    return undefined;
  }
  const record: FaultRecord = { fault, at: Date.now() };
  faults.push(record);
  const success = nextSuccess();
  if (!kill(before.pid, signal)) {
    record.note = 'kill failed';
    return record;
  }
  log(`${fault}: ${signal} to ${name} (pid ${before.pid})`);
  void success.then((t) => (record.firstSuccessMs = t - record.at));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    await sleep(200);
    try {
      const now = readStack().services[name];
      if (now?.pid && now.pid !== before.pid && now.state === 'running' && (!ready || (await ready()))) {
        record.backMs = Date.now() - record.at;
        log(`${fault}: ${name} back (pid ${now.pid}) after ${(record.backMs / 1000).toFixed(1)} s`);
        return record;
      }
    } catch {
      // the stack file is being rewritten
    }
  }
  record.note = `${name} not back within 120 s`;
  log(`${fault}: ${record.note}`);
  return record;
}

async function temporalServing(): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address: stack.temporalAddress, connectTimeout: 1_000 });
    const res = await connection.withDeadline(Date.now() + 2_000, () => connection!.healthService.check({}));
    return res.status === 1;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

/** The cluster's PostgreSQL answers a query (scripts/lib/postgres.ts' readiness check, as its supervisor's). */
async function postgresServing(): Promise<boolean> {
  const [host, port] = (stack.postgres ?? '').split(':');
  if (!host || !port) return true;
  return postgresAnswers({ host, port: Number(port), user: 'postgres' });
}

/** What a log file gained since it was `from` bytes long. */
function logSince(file: string, from: number): string {
  try {
    const size = statSync(file).size;
    if (size <= from) return '';
    const fd = openSync(file, 'r');
    try {
      const buf = Buffer.alloc(size - from);
      readSync(fd, buf, 0, buf.length, from);
      return buf.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

/**
 * PostgreSQL's immediate shutdown under load: SIGQUIT to the postmaster (its backends quit at once, no checkpoint; a
 * SIGKILLed postmaster would leave backends holding its shared memory), so the supervisor's restart runs crash
 * recovery from the WAL. Temporal's store and the wallets' both go away meanwhile. The recovery line names what the
 * server's log says of its recovery.
 */
async function postgresRestart(): Promise<void> {
  const logFile = path.join(path.dirname(stackFile), 'logs', 'postgres.log');
  let from = 0;
  try {
    from = statSync(logFile).size;
  } catch {
    // no log file: the note says so below
  }
  const record = await killService('postgres restart', 'postgres', 'SIGQUIT', postgresServing);
  if (!record) return;
  const recovery = logSince(logFile, from)
    .split('\n')
    .filter((l) => /automatic recovery in progress|redo done|database system is ready/.test(l))
    .map((l) => l.replace(/^.*?LOG:\s*/, '').replace(/ system usage:.*$/, ''));
  const said = recovery.length > 0 ? `its log: ${recovery.join('; ')}` : `no recovery line in ${logFile}`;
  record.note = record.note ? `${record.note}; ${said}` : said;
  log(`postgres restart: ${said}`);
}

async function chaos(loadMs: number, stop: () => boolean): Promise<void> {
  const workers = Object.keys(stack.services).filter((n) => n.startsWith('worker'));
  const apis = Object.keys(stack.services).filter((n) => n.startsWith('api'));
  const once: { at: number; run: () => Promise<unknown> }[] = [];
  if (stack.kind === 'cluster') {
    once.push({ at: 0.3, run: () => killService('temporal restart', 'temporal', 'SIGTERM', temporalServing) });
    once.push({ at: 0.45, run: postgresRestart });
    once.push({ at: 0.5, run: () => killService('redis restart', 'redis', 'SIGKILL') });
  } else {
    log('--dev: the dev server and Redis are not supervised by npm start; no Temporal or Redis restart');
    log('--dev: no PostgreSQL restart (a fault of the cluster soak only)');
  }
  once.push({ at: 0.7, run: () => killService('api kill', pick(apis), 'SIGKILL') });
  // Issue 19's adversaries; each runs beside the others (an outage lasts minutes).
  once.push({ at: 0.15, run: () => rollingDeploy(controls, 20_000) });
  once.push({ at: 0.4, run: () => outageAfterCrash(controls, OUTAGE_MS) });
  once.push({ at: 0.65, run: () => longRetryAfter(controls, RETRY_AFTER_S) });
  const running: Promise<unknown>[] = [];
  let nextWorkerKill = Date.now() + 30_000 + random() * 30_000;
  while (!stop()) {
    await sleep(500);
    const elapsed = (Date.now() - t0) / loadMs;
    const due = once.filter((o) => o.at <= elapsed);
    for (const o of due) {
      once.splice(once.indexOf(o), 1);
      running.push(o.run().catch((err: unknown) => log(`fault failed: ${err instanceof Error ? err.message : err}`)));
    }
    if (Date.now() >= nextWorkerKill && workers.length > 0) {
      await killService('worker kill', pick(workers), 'SIGKILL');
      nextWorkerKill = Date.now() + 30_000 + random() * 30_000;
    }
  }
  for (const o of once) log(`fault at ${Math.round(o.at * 100)} % of the load not reached (the load ended first)`);
  await Promise.all(running);
}

/** The adversaries' view of the soak (bench/soak-adversaries.ts). */
const controls: SoakControls = {
  log,
  simulator,
  killService: async (fault, name, signal) => void (await killService(fault, name, signal)),
  services: () => Object.keys(stack.services),
  get workerEnvFile() {
    return stack.workerEnvFile;
  },
  seed: SEED,
};

// ---------------------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  log(`${dev ? 'dev-server stack (npm start)' : 'cluster (npm run cluster)'} from ${stackFile}`);
  log(`${N} payments at ${RATE}/s, seed ${SEED}; APIs ${stack.apiUrls.join(', ')}`);
  for (const url of stack.apiUrls) {
    const ok = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (!ok) throw new Error(`${url}/healthz does not answer: is the stack running?`);
  }
  await fundWallets();
  await setFaults(controls);
  const loadMs = (N / RATE) * 1_000;
  let loadDone = false;
  let quiet = false;
  const chaosDone = chaos(loadMs, () => loadDone);
  const webhooksDone = webhookChaos(() => quiet);
  // The stack file goes away when the stack stops (its supervisor gave up on a service): the soak has nothing left to
  // measure, so it stops with a line that says so (the cluster's own output says why) instead of running blind.
  let missingSince: number | undefined;
  const refresh = setInterval(() => {
    try {
      stack = readStack();
      missingSince = undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return; // being rewritten
      missingSince ??= Date.now();
      if (Date.now() - missingSince >= 5_000) {
        log(`the stack stopped during the soak (${stackFile} is gone for 5 s): see the stack's own output for why`);
        process.exit(2);
      }
    }
  }, 1_000);

  const running: Promise<void>[] = [];
  const loadStarted = Date.now();
  const progress = setInterval(
    () => log(`${scenariosStarted}/${N} started, ${completedScenarios} scenarios done, ${retried503} 503s repeated`),
    15_000,
  );
  for (let i = 0; i < N; i++) {
    const due = loadStarted + (i / RATE) * 1_000;
    if (due > Date.now()) await sleep(due - Date.now());
    scenariosStarted += 1;
    running.push(
      scenario(i)
        .catch((err: unknown) => log(`scenario ${i} gave up: ${err instanceof Error ? err.message : String(err)}`))
        .finally(() => {
          completedScenarios += 1;
        }),
    );
  }
  await Promise.all(running);
  const loadEnded = Date.now();
  loadDone = true;
  clearInterval(progress);
  await chaosDone;
  log(`load done: ${N} scenarios in ${((loadEnded - loadStarted) / 1000).toFixed(0)} s; waiting for quiescence...`);

  // Quiescence: nothing pending, unknown or running any more (bounded).
  quiet = true;
  await webhooksDone;
  await simulator('/_sim/faults', { method: 'DELETE' }).catch(() => undefined);
  await repeatUnansweredCharges();
  const views = new Map<string, SoakView>();
  log(describeQuiescenceWindow(quiescence, QUIESCE_OVERRIDE_MS));
  const quiesceDeadline = Date.now() + QUIESCE_MS;
  // Every payment but the refused ones (the verdict's own definition): an unanswered charge was repeated above.
  const charges = chargeAnswers(answers);
  let open = payments.map((p) => p.key).filter((k) => stateOf(charges, k) !== 'refused');
  while (open.length > 0) {
    // A pass that starts after the deadline is the last: every view the verdict reads is read after the deadline.
    const last = Date.now() > quiesceDeadline;
    await forEachBounded(open, READ_CONCURRENCY, async (key) => {
      views.set(key, await verdictViewOf(key).catch((err: unknown): SoakView => ({ error: String(err) })));
    });
    open = open.filter((key) => {
      const v = views.get(key);
      // A payment a 5xx then a 4xx answered that the API does not know: never started, nothing to wait for.
      if (neverStarted(charges, key, v)) return false;
      return (
        v === undefined ||
        'error' in v ||
        v.status === 'pending' ||
        v.status === 'unknown' ||
        (v.operations ?? []).some((o) => o.state === 'running') ||
        !walletSettled(v as View)
      );
    });
    if (open.length === 0 || last) break;
    log(`${open.length} payments still moving`);
    await sleep(5_000);
  }
  // The operator's last pass: every review still open is resolved from the ledger, and the view read again.
  const inReview = payments.filter((p) => {
    const v = views.get(p.key);
    return v !== undefined && 'status' in v && v.status === 'needs_review';
  });
  await forEachBounded(inReview, READ_CONCURRENCY, async (p) => {
    const after = await resolveReview(p, views.get(p.key) as View);
    if (after) views.set(p.key, after as SoakView);
  });
  const quiescedMs = Date.now() - loadEnded;
  clearInterval(refresh);
  const ledger = (await simulator(
    `/_sim/ledger?api_key=${encodeURIComponent(stack.providerApiKey ?? config.PROVIDER_API_KEY)}`,
  )) as Ledger;

  // Every wallet credited, read through the API now that nothing moves (issue 23).
  const walletReads = await Promise.all([...new Set(credits.map((c) => c.walletId))].map(readWallet));
  const walletEntries = ledgerEntriesOf(merchant!.merchantId, walletReads);
  const verdict = checkSoak(
    merchant!.merchantId,
    payments,
    answers,
    views,
    ledger,
    reviewedViews as Map<string, InvariantView[]>,
    walletEntries,
  );
  const walletPayments = walletPaymentsOf(views);
  const walletVerdict = checkSoakWallets({
    merchantId: merchant!.merchantId,
    wallets: walletReads,
    credits,
    payments: walletPayments.ended,
    ledger,
  });
  // Every key that answered for good has its record (handed over through the same chaos; a handoff still in its
  // backoff gets up to 2 minutes).
  const keyScopes = expectedKeyScopes(
    payments.map((p) => ({ merchantId: merchant!.merchantId, key: p.key, view: views.get(p.key) })),
  );
  const [pgHost, pgPort] = (stack.postgres ?? '').split(':');
  const paymentsDatabase =
    stack.databaseUrl ??
    (pgHost && pgPort
      ? databaseUrl({ host: pgHost, port: Number(pgPort), user: 'postgres' }, PAYMENTS_DATABASE)
      : undefined);
  const keyDb = paymentsDatabase ? new pg.Pool({ connectionString: paymentsDatabase, max: 1 }) : undefined;
  const [missingKeys, unlikeAnswers] = keyDb
    ? await Promise.all([
        missingKeyRecords(keyDb, keyScopes, 120_000),
        keyRecordsUnlikeAnswers(keyDb, chargeBodies),
      ]).finally(() => keyDb.end())
    : [undefined, undefined];
  const doubleEffects = verdict.doubleEffects + walletVerdict.doubleEffects + orderRaces.bothTook.length;
  const mismatches =
    verdict.mismatches +
    walletVerdict.mismatches +
    (missingKeys?.length ?? 0) +
    (unlikeAnswers ? unlikeAnswers.unlike.length - unlikeAnswers.timeOnly.length : 0) +
    orderRaces.misnamed.length;
  const throughput = N / ((loadEnded - loadStarted) / 1000);
  const ms = (x: number) => `${Math.round(x)} ms`;
  log('');
  log(`throughput: ${throughput.toFixed(2)} payments/s (offered ${RATE}/s), ${answers.length} answers`);
  for (const [kind, values] of Object.entries(latencies)) {
    if (values.length === 0) continue;
    const s = summarize(values);
    log(`latency ${kind}: n=${s.count} p50 ${ms(s.p50)} p95 ${ms(s.p95)} p99 ${ms(s.p99)} max ${ms(s.max)}`);
  }
  if (settleMs.length > 0) {
    const s = summarize(settleMs);
    log(`charge to settled: p50 ${ms(s.p50)} p95 ${ms(s.p95)} p99 ${ms(s.p99)} max ${ms(s.max)}`);
  }
  const statuses = new Map<string, number>();
  for (const a of answers) statuses.set(`${a.kind} ${a.status}`, (statuses.get(`${a.kind} ${a.status}`) ?? 0) + 1);
  log(`answers: ${[...statuses].map(([k, n]) => `${k}: ${n}`).join(', ')}`);
  log(`${ambiguityLine(ambiguity.summary())} (reconcile schedule ${scheduleShape()})`);
  log(ambiguityByKindLine(ambiguity.summary()));
  log(`repeated: ${retried503} answers 503, ${httpErrors} dropped connections, ${other5xx.length} other 5xx`);
  for (const [what, n] of counts(other5xx)) log(`unexpected answer (repeated): ${what} x ${n}`);
  log(`provider effects: ${ledger.effects.length}; faults hit: ${ledger.requests.filter((r) => r.fault).length}`);
  for (const f of faults) {
    log(
      `recovery ${f.fault} at ${((f.at - t0) / 1000).toFixed(0)} s: process back ${
        f.backMs === undefined ? '-' : `${(f.backMs / 1000).toFixed(1)} s`
      }, next confirmed payment ${f.firstSuccessMs === undefined ? '-' : `${(f.firstSuccessMs / 1000).toFixed(1)} s`}${
        f.note ? ` (${f.note})` : ''
      }`,
    );
  }
  log(
    `quiescence ${(quiescedMs / 1000).toFixed(0)} s after the load; reviews resolved by the operator: ` +
      `${reviewsResolved} (${[...counts(resolveAnswers)].map(([k, n]) => `${k} x ${n}`).join(', ') || 'none asked'}); ` +
      `still in review (with reason): ${verdict.needsReview}`,
  );
  if (credits.length > 0) {
    log(walletSummaryLine(walletPayments.ended, walletPayments.refused));
    const kinds = counts(walletEntries.map((e) => e.kind)).map(([kind, n]) => `${kind} ${n}`);
    const held = walletReads.reduce((n, w) => n + ('held' in w.wallet ? w.wallet.held : 0), 0);
    log(
      `wallet verdict: ${walletReads.length} wallets read through the API, ${walletEntries.length} entries ` +
        `(${kinds.join(', ') || 'none'}), ${held} held now; ${walletVerdict.doubleEffects} double effects, ` +
        `${walletVerdict.mismatches} mismatches`,
    );
  }
  log(
    missingKeys === undefined
      ? 'key records: not checked (the stack names no PostgreSQL)'
      : `key records: ${keyScopes.length - missingKeys.length} of ${keyScopes.length} answered keys recorded ` +
          `(charges, succeeded captures and refunds); ${missingKeys.length} missing; ` +
          `charge answers held against their records: ${unlikeAnswers?.compared ?? 0} (200s with an answered status), ` +
          `${unlikeAnswers?.unlike.length ?? 0} unlike (${unlikeAnswers?.timeOnly.length ?? 0} in updatedAt alone, ` +
          `reported, not counted)`,
  );
  log(
    `order races (two keys of a new order at once, one to each of ${stack.apiUrls.length} API(s)): ` +
      `${orderRaces.run} run, ${orderRaces.oneTook} taken by one key (the other 409 payment_in_flight), ` +
      `${orderRaces.undecided} undecided (an answer lost to the chaos), ${orderRaces.bothTook.length} taken by both`,
  );
  const problems = [
    ...orderRaces.bothTook.map((orderId) => `order ${orderId} taken by both keys sent at once (two charges)`),
    ...orderRaces.misnamed.map((what) => `order race: the refused key was not told the taker: ${what}`),
    ...verdict.problems,
    ...walletVerdict.problems.map((p) => `wallet ${p}`),
    ...(missingKeys ?? []).map((scope) => `no key record for ${scope}`),
    ...(unlikeAnswers?.unlike ?? []).filter((u) => !unlikeAnswers?.timeOnly.includes(u)),
  ];
  for (const u of unlikeAnswers?.timeOnly ?? []) log(`known defect (updatedAt alone, not counted): ${u}`);
  for (const problem of problems.slice(0, 30)) log(`problem: ${problem}`);
  if (problems.length > 30) log(`... and ${problems.length - 30} more problems`);
  process.stdout.write(
    `soak: ${verdict.payments} payments, ${doubleEffects} double effects, ${verdict.stuck} stuck, ` +
      `${mismatches} mismatches\n`,
  );
  return doubleEffects === 0 && verdict.stuck === 0 && mismatches === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`[soak] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(2);
  },
);
