/**
 * A charge's two reads of the database before anything starts (src/client/charges.ts): its wallet part's check and its
 * key's record. They are made together, and answered as if in turn: the wallet part's refusal first, then the
 * record's. No call reaches Temporal here: every case ends in those checks (a refusal, or a recorded answer).
 */
import type { Client } from '@temporalio/client';
import { IdempotencyKeyReused, PaymentsClient, ValidationError } from '../../src/client';
import { chargeFingerprint } from '../../src/client/fingerprint';
import type { KeyRecordReader } from '../../src/domain/key-records';
import { ChargeRequest } from '../../src/domain/payment';
import { startingView } from '../../src/domain/starting-view';
import type { WalletReader, WalletView } from '../../src/domain/wallets';
import { defaultPaymentTimings } from '../../src/domain/workflow-inputs';

// The constructor only reads the namespace; a call that reached Temporal would throw on this client.
const client = { options: { namespace: 'default' } } as unknown as Client;

const body = {
  orderId: 'order-1',
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  wallet: { walletId: 'w1', amount: 1_000 },
};
const request = ChargeRequest.parse({ ...body, provider: 'simulator' });
const recordedView = startingView({ merchantId: 'm1', key: 'k1', request }, 'pending', '2026-12-03T10:00:00.000Z');
const wallet: WalletView = {
  walletId: 'w1',
  merchantId: 'm1',
  currency: 'EUR',
  balance: 5_000,
  held: 0,
  available: 5_000,
  updatedAt: '2026-12-03T09:00:00.000Z',
};

/**
 * Readers that each, once called, wait (at most `waitMs`) until the other one was called too, and say whether it was:
 * made one after the other, the first waits out its bound alone and the reads did not overlap.
 */
function overlappingReaders(
  answers: { wallet: WalletView | undefined; record: Awaited<ReturnType<KeyRecordReader['find']>> | Error },
  waitMs = 1_500,
) {
  const entered = { wallet: false, record: false };
  const overlapped = { wallet: false, record: false };
  const meet = async (self: 'wallet' | 'record', other: 'wallet' | 'record'): Promise<void> => {
    entered[self] = true;
    const until = Date.now() + waitMs;
    while (!entered[other] && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    overlapped[self] = entered[other];
  };
  const wallets: WalletReader = {
    get: async () => {
      await meet('wallet', 'record');
      return answers.wallet;
    },
  };
  const keyRecords: KeyRecordReader = {
    find: async () => {
      await meet('record', 'wallet');
      if (answers.record instanceof Error) throw answers.record;
      return answers.record;
    },
  };
  const payments = new PaymentsClient(client, {
    taskQueue: 'q',
    timings: defaultPaymentTimings,
    wallets,
    keyRecords,
  });
  return { payments, overlapped };
}

describe("a charge's wallet check and key record", () => {
  it('are read at the same time: a wallet payment whose record replays waits for one round trip, not two', async () => {
    const { payments, overlapped } = overlappingReaders({
      wallet,
      record: { fingerprint: chargeFingerprint(request), view: recordedView },
    });
    const answer = await payments.charge('m1', 'k1', body);
    expect(answer).toEqual({ view: recordedView, replayed: true });
    expect(overlapped).toEqual({ wallet: true, record: true });
  });

  it("answer the wallet part's refusal before the record's: no such wallet is a 400 even under a reused key", async () => {
    const { payments, overlapped } = overlappingReaders({
      wallet: undefined,
      record: { fingerprint: 'another request', view: recordedView },
    });
    const refused = payments.charge('m1', 'k1', body);
    await expect(refused).rejects.toBeInstanceOf(ValidationError);
    await expect(refused).rejects.toMatchObject({ fields: [{ path: 'wallet.walletId' }] });
    expect(overlapped).toEqual({ wallet: true, record: true });
  });

  it("answer the record's refusal when the wallet part passes: another body under the key is 422", async () => {
    const { payments } = overlappingReaders({
      wallet,
      record: { fingerprint: 'another request', view: recordedView },
    });
    await expect(payments.charge('m1', 'k1', body)).rejects.toBeInstanceOf(IdempotencyKeyReused);
  });

  it("answer a failed record read only when the wallet part passes (else the wallet's 400)", async () => {
    const down = new Error('the key records are unavailable');
    const refusedWallet = overlappingReaders({ wallet: { ...wallet, currency: 'USD' }, record: down });
    await expect(refusedWallet.payments.charge('m1', 'k1', body)).rejects.toMatchObject({
      fields: [{ path: 'amount.currency' }],
    });
    const goodWallet = overlappingReaders({ wallet, record: down });
    await expect(goodWallet.payments.charge('m1', 'k1', body)).rejects.toBe(down);
  });
});
