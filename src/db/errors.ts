/**
 * Database outcomes, classified like provider outcomes (docs/architecture.md#where-balances-live): a failure before
 * COMMIT was sent applied nothing (the server rolls an unfinished transaction back), so a retry is always safe; a COMMIT
 * whose answer was lost may have applied, so its outcome is unknown until the operation id is read back.
 */
import pg from 'pg';
import { WalletFailure } from '../domain/wallet-errors';

/** The classes of a database failure: the two {@link WalletFailure} types a caller branches on. */
export type DatabaseFailureType = typeof WalletFailure.DatabaseNotApplied | typeof WalletFailure.DatabaseOutcomeUnknown;

/** Why, in a word, for logs and metrics (never a message with data in it). */
export type DatabaseFailureReason =
  | 'connect_failed'
  | 'pool_timeout'
  | 'connection_lost'
  | 'statement_timeout'
  | 'rolled_back'
  | 'server_error'
  | 'commit_unanswered';

const brand: unique symbol = Symbol.for('payment-workflows.DatabaseError');

/** The one error the database layer throws; `type` says whether anything may have been applied. */
export class DatabaseError extends Error {
  readonly [brand] = true;

  constructor(
    readonly type: DatabaseFailureType,
    readonly reason: DatabaseFailureReason,
    /** The SQLSTATE or the socket error code, when there was one. */
    readonly code: string | undefined,
    options: { cause: unknown },
  ) {
    super(`${type}: ${reason}${code === undefined ? '' : ` (${code})`}`, options);
    this.name = 'DatabaseError';
  }
}

/** True for every {@link DatabaseError}, also one from another copy of this module (jest registries). */
export const isDatabaseError = (e: unknown): e is DatabaseError =>
  e instanceof DatabaseError || (e instanceof Error && (e as unknown as Record<symbol, unknown>)[brand] === true);

/**
 * Where a transaction was when it failed; `statement`: a statement that is a transaction by itself was sent (its answer
 * is its COMMIT's).
 */
export type TransactionPhase = 'connect' | 'before_commit' | 'commit' | 'statement';

/** node-postgres' errors without a SQLSTATE: the connection went away, or a client-side timeout fired. */
const connectionMessages = [
  'Connection terminated',
  'Connection terminated unexpectedly',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];
const poolTimeout = 'timeout exceeded when trying to connect';

/** Fields of an error, read without `instanceof Error` (a socket's error comes from another realm under jest). */
const fieldsOf = (err: unknown): { message?: unknown; code?: unknown; syscall?: unknown } =>
  typeof err === 'object' && err !== null ? (err as Record<string, unknown>) : {};

/** A failure of the driver or the server (as opposed to an error of the caller's own, which passes through). */
export function isDriverError(err: unknown): boolean {
  if (err instanceof pg.DatabaseError) return true;
  const { message, code, syscall } = fieldsOf(err);
  // A socket error (ECONNREFUSED, ECONNRESET, ...) names its system call.
  if (typeof code === 'string' && typeof syscall === 'string') return true;
  return typeof message === 'string' && (message === poolTimeout || connectionMessages.includes(message));
}

/** SQLSTATE classes that say the server rolled the transaction back (serialization, deadlock, constraint, aborted). */
const rolledBackClasses = ['40', '23', '25'];

/**
 * Classifies a driver or server error by where it happened. Before COMMIT (and on connect) nothing was applied. At
 * COMMIT only an answer that says the transaction rolled back applied nothing; a lost connection, a client-side timeout
 * or the server shutting down under it (57P01 may come after the commit record was written) leave it unknown. A
 * one-statement transaction's error answer is a rollback, but for the shutdown codes and a lost connection.
 */
export function classifyDatabaseError(err: unknown, phase: TransactionPhase): DatabaseError {
  const fields = fieldsOf(err);
  const code = typeof fields.code === 'string' ? fields.code : undefined;
  const notApplied = (reason: DatabaseFailureReason) =>
    new DatabaseError(WalletFailure.DatabaseNotApplied, reason, code, { cause: err });
  if (phase === 'connect') return notApplied(fields.message === poolTimeout ? 'pool_timeout' : 'connect_failed');
  if (phase === 'before_commit') {
    if (err instanceof pg.DatabaseError) return notApplied(code === '57014' ? 'statement_timeout' : 'server_error');
    return notApplied('connection_lost');
  }
  // A statement that is its own transaction and that the server answered with an error rolled back (a timeout, a lock
  // not granted, a constraint), unless the server was shutting down: that error may come after the commit record.
  if (phase === 'statement' && err instanceof pg.DatabaseError && !code?.startsWith('57P')) {
    return notApplied(code === '57014' ? 'statement_timeout' : 'rolled_back');
  }
  if (err instanceof pg.DatabaseError && rolledBackClasses.some((c) => code?.startsWith(c))) {
    return notApplied('rolled_back');
  }
  return new DatabaseError(WalletFailure.DatabaseOutcomeUnknown, 'commit_unanswered', code, { cause: err });
}
