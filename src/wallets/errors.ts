/** The ledger's refusals: typed by {@link WalletFailure}, decided before anything is written. */
import type { WalletFailure } from '../domain/wallet-errors';

/** The refusals the ledger decides itself (database failures are src/db's `DatabaseError`). */
export type WalletRefusalType = Exclude<WalletFailure, 'DatabaseNotApplied' | 'DatabaseOutcomeUnknown'>;

const brand: unique symbol = Symbol.for('payment-workflows.WalletError');

/** A refusal of one wallet step: nothing was written. Branch on `type`, never on the message. */
export class WalletError extends Error {
  readonly [brand] = true;

  constructor(
    readonly type: WalletRefusalType,
    message: string,
    /** HoldSettled by a capture or release: when that entry was written (the decision a late step reads). */
    readonly settledAt?: string,
  ) {
    super(message);
    this.name = 'WalletError';
  }
}

/** True for every {@link WalletError}, also one from another copy of this module. */
export const isWalletError = (e: unknown): e is WalletError =>
  e instanceof WalletError || (e instanceof Error && (e as unknown as Record<symbol, unknown>)[brand] === true);
