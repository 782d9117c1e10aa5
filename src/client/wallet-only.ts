/**
 * A wallet-only payment (the wallet pays the whole amount, no provider part): its outcome is the ledger's decision on
 * one debit, so the API does not wait for a worker to tell it. It starts the payment's workflow (durable in Temporal
 * before anything moves), debits the wallet itself under the payment key, and answers from that decision. The workflow
 * debits the same key in its first task: whichever of the two comes second reads the first one's decision back, a
 * capture or a recorded decline (src/wallets/ledger.ts), so both answer the same payment; the money moves once. When
 * the API's debit does not answer (database trouble), the workflow's answer is read instead, as for a card payment.
 */
import type { WorkflowStartOptions } from '@temporalio/client';
import type { ChargeRequest } from '../domain/payment';
import { startingView, walletOnlyAnswer } from '../domain/starting-view';
import { providerAmountOf } from '../domain/wallet-operations';
import type { WalletDebitDecision, WalletDebiter, WalletReader } from '../domain/wallets';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import type { chargeWorkflow } from '../workflows';
import { type ChargeResult, firstAnswer, startedWithoutAnswer } from './charge-answers';
import type { ClientContext } from './context';

/** The ledger that debits a charge the wallet pays whole; undefined for any other charge or without one. */
export function walletDebiterFor(
  ctx: { readonly wallets?: WalletReader & Partial<WalletDebiter> },
  request: ChargeRequest,
): WalletDebiter | undefined {
  const debiter = ctx.wallets;
  if (request.wallet === undefined || providerAmountOf(request) !== 0 || debiter?.debit === undefined) return undefined;
  return debiter as WalletDebiter;
}

/** What {@link chargeWalletOnly} starts and answers by. */
export interface WalletOnlyStart {
  readonly workflowId: string;
  readonly fingerprint: string;
  /** Names this request in the payment's memo (whether it created the run). */
  readonly startedBy: string;
  /** The workflow's input, with the API's `createdAt`. */
  readonly input: ChargeWorkflowInput;
  readonly startOptions: WorkflowStartOptions<typeof chargeWorkflow>;
  /** The start's own deadline. */
  readonly deadline: number;
  /** When the answer is due at the latest (a 202 past it). */
  readonly answerBy: number;
}

/**
 * Starts the wallet-only payment, then debits it and answers the ledger's decision. Nothing is debited unless the
 * start is durable: a start refused or unanswered is answered from what Temporal has (a repeat, a closed payment, 503).
 */
export async function chargeWalletOnly(
  ctx: ClientContext,
  debiter: WalletDebiter,
  start: WalletOnlyStart,
): Promise<ChargeResult> {
  const { workflowId, fingerprint, startedBy, input, startOptions, deadline, answerBy } = start;
  try {
    await ctx.client.connection.withDeadline(deadline, () =>
      ctx.client.workflow.start<typeof chargeWorkflow>('chargeWorkflow', startOptions),
    );
  } catch (err) {
    // Already started (a repeat, or a racer with this key), or no answer in time: Temporal's durable state decides.
    return startedWithoutAnswer(ctx, workflowId, fingerprint, startedBy, input, err, answerBy);
  }
  const createdAt = input.createdAt ?? new Date().toISOString();
  const decision = await debitOnce(debiter, input);
  if (decision !== undefined) return { view: walletOnlyAnswer(input, decision, createdAt), replayed: false };
  // The ledger did not answer: the workflow's debit decides (it reads back whatever this one may have done); without
  // a worker in time the payment is answered as started (202), and goes on.
  const answered = await firstAnswer(ctx, workflowId, answerBy);
  if (answered !== undefined) return { view: answered, replayed: false };
  return { view: startingView(input, 'pending', createdAt), replayed: false, completed: false };
}

/** The API's debit of the payment, or undefined when the ledger refused it or did not answer (the workflow decides). */
async function debitOnce(debiter: WalletDebiter, input: ChargeWorkflowInput): Promise<WalletDebitDecision | undefined> {
  const part = input.request.wallet;
  if (part === undefined) return undefined;
  try {
    return await debiter.debit({
      merchantId: input.merchantId,
      walletId: part.walletId,
      paymentKey: input.key,
      amount: part.amount,
      currency: input.request.amount.currency,
    });
  } catch {
    // A refusal (the wallet went away, another currency, the key's debit settled otherwise) or database trouble:
    // the workflow meets the same and answers it, with its retries and its settlement of an unknown outcome.
    return undefined;
  }
}
