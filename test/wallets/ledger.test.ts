/**
 * The wallet ledger on a real PostgreSQL (a database of this file's own): credits, two-phase debits, refunds, each
 * operation id applied once, available never below 0, the entries always summing to the wallet.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { type Database, migrate } from '../../src/db';
import { WalletFailure } from '../../src/domain/wallet-errors';
import { type WalletLedger as Ledger, WalletLedger, type WalletObserver } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { raceHolds, spawnRacer } from '../helpers/wallet-racer';

let db: Database & { url: string; drop(): Promise<void> };
let ledger: Ledger;
const seen: string[] = [];
const observer: WalletObserver = { onOperation: (kind, outcome) => void seen.push(`${kind}:${outcome}`) };

beforeAll(async () => {
  db = await openTestDatabase({ poolSize: 16 });
  ledger = new WalletLedger(db.pool, observer);
});
afterAll(() => db.drop());

const m = 'm1';
const fresh = () => `w-${randomUUID().slice(0, 8)}`;
const eur = (value: number) => ({ value, currency: 'EUR' as const });

async function funded(balance: number): Promise<string> {
  const walletId = fresh();
  await ledger.credit(m, walletId, `fund-${walletId}`, { amount: eur(balance) });
  return walletId;
}

/** The invariant: balance = credits + refunds - captures, held = holds - captures - releases, from the entries. */
async function expectEntriesMatch(walletId: string): Promise<{ balance: number; held: number }> {
  const { rows } = await db.pool.query<{ balance: string; held: string; sum_balance: string; sum_held: string }>(
    `SELECT w.balance, w.held,
       COALESCE(SUM(CASE e.kind WHEN 'credit' THEN e.amount WHEN 'refund' THEN e.amount
                                WHEN 'capture' THEN -e.amount ELSE 0 END), 0) AS sum_balance,
       COALESCE(SUM(CASE e.kind WHEN 'hold' THEN e.amount WHEN 'capture' THEN -e.amount
                                WHEN 'release' THEN -e.amount ELSE 0 END), 0) AS sum_held
     FROM wallets w LEFT JOIN wallet_entries e USING (merchant_id, wallet_id)
     WHERE w.merchant_id = $1 AND w.wallet_id = $2 GROUP BY w.balance, w.held`,
    [m, walletId],
  );
  const row = rows[0]!;
  expect(Number(row.sum_balance)).toBe(Number(row.balance));
  expect(Number(row.sum_held)).toBe(Number(row.held));
  return { balance: Number(row.balance), held: Number(row.held) };
}

const entriesOf = async (walletId: string) => (await ledger.entries(m, walletId, { pageSize: 100 }))?.entries ?? [];

describe('credits', () => {
  it('creates the wallet in its first currency, replays a repeat of the key and refuses another body under it', async () => {
    const walletId = fresh();
    const first = await ledger.credit(m, walletId, 'k1', { amount: eur(500), reason: 'welcome' });
    const again = await ledger.credit(m, walletId, 'k1', { amount: eur(500), reason: 'welcome' });
    await ledger.credit(m, walletId, 'k2', { amount: eur(300) });
    const replayedLater = await ledger.credit(m, walletId, 'k1', { amount: eur(500), reason: 'welcome' });

    expect(first).toEqual({ replayed: false, wallet: expect.objectContaining({ balance: 500, currency: 'EUR' }) });
    expect(again).toEqual({ replayed: true, wallet: first.wallet });
    // The first answer, not the wallet as it is now.
    expect(replayedLater.wallet).toEqual(first.wallet);
    await expect(ledger.credit(m, walletId, 'k1', { amount: eur(501), reason: 'welcome' })).rejects.toMatchObject({
      type: WalletFailure.OperationConflict,
    });
    await expect(ledger.credit(m, fresh(), 'k1', { amount: eur(500), reason: 'welcome' })).rejects.toMatchObject({
      type: WalletFailure.OperationConflict,
    });
    await expect(ledger.credit(m, walletId, 'k3', { amount: { value: 5, currency: 'USD' } })).rejects.toMatchObject({
      type: WalletFailure.CurrencyMismatch,
    });
    expect((await entriesOf(walletId)).map((e) => e.operationId)).toEqual([`credit:${m}:k1`, `credit:${m}:k2`]);
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 800, held: 0 });
  });

  it('applies the same key sent to two wallets at once to one of them only', async () => {
    const [a, b] = [fresh(), fresh()];
    const key = `race-${randomUUID()}`;
    const results = await Promise.allSettled([
      ledger.credit(m, a, key, { amount: eur(100) }),
      ledger.credit(m, b, key, { amount: eur(100) }),
    ]);

    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.find((r) => r.status === 'rejected')).toMatchObject({
      reason: { type: WalletFailure.OperationConflict },
    });
    const { rows } = await db.pool.query('SELECT 1 FROM wallet_entries WHERE merchant_id = $1 AND operation_id = $2', [
      m,
      `credit:${m}:${key}`,
    ]);
    expect(rows).toHaveLength(1);
  });
});

describe('holds', () => {
  it('holds once per payment key: a repeat replays, another amount is refused before any effect', async () => {
    const walletId = await funded(1_000);
    const hold = { merchantId: m, walletId, paymentKey: 'p1', amount: 300, currency: 'EUR' as const };

    const first = await ledger.hold(hold);
    const again = await ledger.hold(hold);
    await expect(ledger.hold({ ...hold, amount: 301 })).rejects.toMatchObject({
      type: WalletFailure.OperationConflict,
    });

    expect(first).toMatchObject({
      status: 'held',
      replayed: false,
      wallet: { balance: 1_000, held: 300, available: 700 },
    });
    expect(again).toEqual({ ...first, replayed: true });
    expect((await entriesOf(walletId)).filter((e) => e.kind === 'hold')).toHaveLength(1);
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 1_000, held: 300 });
  });

  it('answers insufficient funds without writing anything, and refuses another currency', async () => {
    const walletId = await funded(100);
    const hold = { merchantId: m, walletId, paymentKey: `${walletId}-p1`, amount: 101, currency: 'EUR' as const };

    expect(await ledger.hold(hold)).toMatchObject({ status: 'insufficient_funds', available: 100 });
    await expect(ledger.hold({ ...hold, amount: 1, currency: 'USD' })).rejects.toMatchObject({
      type: WalletFailure.CurrencyMismatch,
    });
    await expect(ledger.hold({ ...hold, walletId: fresh() })).rejects.toMatchObject({
      type: WalletFailure.WalletNotFound,
    });
    expect(await entriesOf(walletId)).toHaveLength(1);
  });

  it('captures or releases a hold once, never both; a release before the hold bars it', async () => {
    const walletId = await funded(1_000);
    // Payment keys are merchant-wide: each test's are its own.
    const ref = (paymentKey: string) => ({ merchantId: m, walletId, paymentKey: `${walletId}-${paymentKey}` });
    await ledger.hold({ ...ref('cap'), amount: 200, currency: 'EUR' });
    await ledger.hold({ ...ref('rel'), amount: 300, currency: 'EUR' });

    expect(await ledger.capture(ref('cap'))).toMatchObject({ replayed: false, amount: 200 });
    expect(await ledger.capture(ref('cap'))).toMatchObject({ replayed: true, amount: 200 });
    await expect(ledger.release(ref('cap'))).rejects.toMatchObject({ type: WalletFailure.HoldSettled });
    expect(await ledger.release(ref('rel'))).toMatchObject({ replayed: false, amount: 300 });
    await expect(ledger.capture(ref('rel'))).rejects.toMatchObject({ type: WalletFailure.HoldSettled });
    await expect(ledger.capture(ref('none'))).rejects.toMatchObject({ type: WalletFailure.HoldNotFound });
    // A release of a hold that never applied (its outcome was unknown) records 0 and refuses it if it comes late.
    expect(await ledger.release(ref('late'))).toMatchObject({ replayed: false, amount: 0 });
    await expect(ledger.hold({ ...ref('late'), amount: 10, currency: 'EUR' })).rejects.toMatchObject({
      type: WalletFailure.HoldSettled,
    });

    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 800, held: 0 });
  });

  it('refunds a captured hold up to its amount, once per refund key', async () => {
    const walletId = await funded(1_000);
    const ref = { merchantId: m, walletId, paymentKey: `${walletId}-paid` };
    await ledger.hold({ ...ref, amount: 400, currency: 'EUR' });
    await expect(ledger.refund({ ...ref, refundKey: 'r0', amount: 1 })).rejects.toMatchObject({
      type: WalletFailure.HoldNotFound,
    });
    await ledger.capture(ref);

    expect(await ledger.refund({ ...ref, refundKey: 'r1', amount: 150 })).toMatchObject({ replayed: false });
    expect(await ledger.refund({ ...ref, refundKey: 'r1', amount: 150 })).toMatchObject({ replayed: true });
    await expect(ledger.refund({ ...ref, refundKey: 'r1', amount: 151 })).rejects.toMatchObject({
      type: WalletFailure.OperationConflict,
    });
    await expect(ledger.refund({ ...ref, refundKey: 'r2', amount: 251 })).rejects.toMatchObject({
      type: WalletFailure.AmountExceeded,
    });
    // Two refunds at once that each fit but not together: the wallet lock orders them, the second is refused.
    const both = await Promise.allSettled([
      ledger.refund({ ...ref, refundKey: 'r3', amount: 200 }),
      ledger.refund({ ...ref, refundKey: 'r4', amount: 200 }),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);

    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 950, held: 0 });
  });

  it('debits a wallet-only payment as a hold and its capture in one step, once per payment key', async () => {
    const walletId = await funded(1_000);
    const ref = (paymentKey: string) => ({ merchantId: m, walletId, paymentKey: `${walletId}-${paymentKey}` });
    const debit = (paymentKey: string, amount: number) => ledger.debit({ ...ref(paymentKey), amount, currency: 'EUR' });

    expect(await debit('d1', 300)).toMatchObject({ status: 'captured', replayed: false, amount: 300 });
    expect(await debit('d1', 300)).toMatchObject({ status: 'captured', replayed: true, amount: 300 });
    await expect(debit('d1', 301)).rejects.toMatchObject({ type: WalletFailure.OperationConflict });
    // The same entries as a hold and its capture: each answers the other.
    expect(await ledger.capture(ref('d1'))).toMatchObject({ replayed: true, amount: 300 });
    expect(await ledger.hold({ ...ref('d1'), amount: 300, currency: 'EUR' })).toMatchObject({ replayed: true });
    await expect(ledger.release(ref('d1'))).rejects.toMatchObject({ type: WalletFailure.HoldSettled });
    // A hold made before (the older path, a worker that died between its steps) is captured, not held twice.
    await ledger.hold({ ...ref('d2'), amount: 200, currency: 'EUR' });
    expect(await debit('d2', 200)).toMatchObject({ status: 'captured', replayed: false });
    // A release made before (a debit whose outcome was unknown) bars a late debit of the key.
    expect(await ledger.release(ref('d3'))).toMatchObject({ amount: 0 });
    await expect(debit('d3', 100)).rejects.toMatchObject({ type: WalletFailure.HoldSettled });
    // Short funds: declined, and the decline recorded (a 0 release, nothing moved); another currency refused.
    expect(await debit('d4', 501)).toMatchObject({ status: 'insufficient_funds', replayed: false, available: 500 });
    await expect(ledger.debit({ ...ref('d5'), amount: 1, currency: 'USD' })).rejects.toMatchObject({
      type: WalletFailure.CurrencyMismatch,
    });

    expect((await entriesOf(walletId)).slice(1).map((e) => [e.kind, e.amount])).toEqual([
      ['hold', 300],
      ['capture', 300],
      ['hold', 200],
      ['capture', 200],
      ['release', 0],
      ['release', 0],
    ]);
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 500, held: 0 });
  });

  it('decides a payment key’s debit once: a decline stays a decline after money arrives, a capture stays one', async () => {
    // The API and the payment's workflow both debit a wallet-only payment (src/client/wallet-only.ts); whichever comes
    // second must answer the first one's decision, never a second one.
    const walletId = await funded(100);
    const args = (paymentKey: string, amount: number) =>
      ({ merchantId: m, walletId, paymentKey: `${walletId}-${paymentKey}`, amount, currency: 'EUR' }) as const;
    const declined = await ledger.debit(args('short', 150));
    expect(declined).toMatchObject({ status: 'insufficient_funds', replayed: false, available: 100 });
    await ledger.credit(m, walletId, `${walletId}-topup`, { amount: { value: 500, currency: 'EUR' } });
    // Money arrived in between: the second debit of the key answers the recorded decline, with its time.
    const again = await ledger.debit(args('short', 150));
    expect(again).toEqual({ ...declined, replayed: true, wallet: expect.anything() });
    expect(again.at).toBe(declined.at);
    // A late hold of the declined key is refused, as every release bars one.
    await expect(ledger.hold(args('short', 150))).rejects.toMatchObject({ type: WalletFailure.HoldSettled });
    // A capture answers the same capture and its time, whoever asks.
    const captured = await ledger.debit(args('paid', 150));
    expect(captured).toMatchObject({ status: 'captured', replayed: false });
    expect(await ledger.debit(args('paid', 150))).toMatchObject({
      status: 'captured',
      replayed: true,
      at: captured.at,
    });
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 450, held: 0 });
  });

  it('a debit queued behind its key’s decline answers that decline, though money arrived before it ran', async () => {
    // The debit is one statement (wallet_debit) that waits here for the wallet's lock while the other debit of the
    // key declines and 500 arrive: it must answer the recorded decline, never capture now that the money is there.
    const walletId = await funded(100);
    const paymentKey = `${walletId}-queued`;
    const args = { merchantId: m, walletId, paymentKey, amount: 150, currency: 'EUR' } as const;
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM wallets WHERE merchant_id = $1 AND wallet_id = $2 FOR UPDATE', [m, walletId]);
      const queued = ledger.debit(args);
      const holderPid = (holder as unknown as { processID: number }).processID;
      await eventually(
        'the debit waits for the wallet’s row',
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
            [holderPid],
          );
          return (rows[0]?.n ?? 0) >= 1;
        },
        6_000,
        20,
      );
      // Under the lock: the payment's decline is recorded (the other debit of the key came first and found 100),
      // then 500 arrive; both commit while the debit waits.
      await holder.query(`SELECT * FROM wallet_debit($1, $2, $3, 150, 'EUR', $4, $5, $6, 'insufficient_funds')`, [
        m,
        walletId,
        paymentKey,
        `hold:${m}:${paymentKey}`,
        `capture:${m}:${paymentKey}`,
        `release:${m}:${paymentKey}`,
      ]);
      await holder.query(`SELECT * FROM wallet_append_entry($1, $2, $3, 'credit', 500, 500, 0, NULL, NULL, NULL)`, [
        m,
        walletId,
        `credit:${m}:${walletId}-topup`,
      ]);
      await holder.query('COMMIT');

      expect(await queued).toMatchObject({ status: 'insufficient_funds', replayed: true, available: 100 });
    } finally {
      holder.release();
    }
    expect((await entriesOf(walletId)).map((e) => [e.kind, e.amount])).toEqual([
      ['credit', 100],
      ['release', 0],
      ['credit', 500],
    ]);
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 600, held: 0 });
  });

  it('holds exactly what the balance covers: 200 holds of 100 on 5,000 from two processes at once', async () => {
    const walletId = await funded(5_000);
    const spec = (side: string) => ({
      url: db.url,
      merchantId: m,
      walletId,
      paymentKeys: Array.from({ length: 100 }, (_, i) => `${walletId}-${side}-${i}`),
      amount: 100,
      currency: 'EUR',
      poolSize: 8,
    });
    const racer = await spawnRacer(spec('other'));
    const [theirs, ours] = await Promise.all([racer.go(), raceHolds(ledger, spec('ours'))]);
    const all = [...theirs, ...ours];

    expect(all.filter((o) => o === 'held')).toHaveLength(50);
    expect(all.filter((o) => o === 'insufficient_funds')).toHaveLength(150);
    // Both processes won some: their holds did overlap.
    expect(theirs.filter((o) => o === 'held').length).toBeGreaterThan(0);
    expect(ours.filter((o) => o === 'held').length).toBeGreaterThan(0);
    expect(await ledger.get(m, walletId)).toMatchObject({ balance: 5_000, held: 5_000, available: 0 });
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 5_000, held: 5_000 });
  });
});

describe('a fleet where some processes run the previous release', () => {
  it('holds each key once and exactly what the balance covers: the same 100 keys held from both kinds at once', async () => {
    // Processes of the release before migration 0005 hold statement by statement; this one holds in one statement
    // (wallet_hold). During a deploy both hold the same payment keys (the API's retry, a task moved to a new worker).
    const walletId = await funded(5_000);
    const spec = (legacy: boolean) => ({
      url: db.url,
      merchantId: m,
      walletId,
      paymentKeys: Array.from({ length: 100 }, (_, i) => `${walletId}-shared-${i}`),
      amount: 100,
      currency: 'EUR',
      poolSize: 8,
      legacy,
    });
    const racer = await spawnRacer(spec(true));
    const [theirs, ours] = await Promise.all([racer.go(), raceHolds(ledger, spec(false))]);

    // Per key both answer alike (the second reads the first's hold, or finds the same short funds).
    expect(theirs.map((o, i) => [o, ours[i]]).filter(([a, b]) => a !== b)).toEqual([]);
    expect(ours.filter((o) => o === 'held')).toHaveLength(50);
    expect(ours.filter((o) => o === 'insufficient_funds')).toHaveLength(50);
    const holds = (await entriesOf(walletId)).filter((e) => e.kind === 'hold');
    expect(new Set(holds.map((e) => e.paymentKey)).size).toBe(50);
    expect(holds).toHaveLength(50);
    expect(await expectEntriesMatch(walletId)).toEqual({ balance: 5_000, held: 5_000 });
  });
});

describe('the table itself', () => {
  it('keeps entries append-only and available never below 0, whatever a statement tries', async () => {
    const walletId = await funded(100);
    await expect(db.pool.query('UPDATE wallet_entries SET amount = 1')).rejects.toThrow(/append-only/);
    await expect(db.pool.query('DELETE FROM wallet_entries')).rejects.toThrow(/append-only/);
    await expect(
      db.pool.query('UPDATE wallets SET held = 101 WHERE merchant_id = $1 AND wallet_id = $2', [m, walletId]),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('applies the migrations once, and refuses to start on an applied migration that changed', async () => {
    expect(await migrate(db.pool)).toEqual([]);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    await client.query(`UPDATE schema_migrations SET checksum = 'edited' WHERE name = '0001_wallets'`);
    await expect(migrate(db.pool)).rejects.toThrow(/0001_wallets changed after it was applied/);
    await client.query(`UPDATE schema_migrations SET checksum = $1 WHERE name = '0001_wallets'`, [
      (await import('../../src/db')).migrationFiles()[0]!.checksum,
    ]);
    await client.end();
  });

  it('pages entries oldest first and reports every operation to the observer', async () => {
    const walletId = fresh();
    for (let i = 0; i < 5; i++) await ledger.credit(m, walletId, `${walletId}-${i}`, { amount: eur(10 + i) });
    const first = await ledger.entries(m, walletId, { pageSize: 2 });
    const second = await ledger.entries(m, walletId, { pageSize: 2, pageToken: first!.nextPageToken });
    const third = await ledger.entries(m, walletId, { pageSize: 2, pageToken: second!.nextPageToken });

    expect([...first!.entries, ...second!.entries, ...third!.entries].map((e) => e.amount)).toEqual([
      10, 11, 12, 13, 14,
    ]);
    expect(third!.nextPageToken).toBeUndefined();
    expect(await ledger.entries('m2', walletId, {})).toBeUndefined();
    expect(await ledger.get('m2', walletId)).toBeUndefined();
    expect(seen).toEqual(
      expect.arrayContaining(['credit:applied', 'credit:replayed', 'hold:insufficient_funds', 'read:not_found']),
    );
  });
});
