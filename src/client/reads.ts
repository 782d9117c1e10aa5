/** Reads: one payment's current view, and pages of a merchant's payments from Temporal visibility. */
import { WorkflowNotFoundError } from '@temporalio/client';
import { paymentQuery } from '../domain/definitions';
import { MerchantId, type PaymentView } from '../domain/payment';
import {
  type PaymentFilter,
  decodePageToken,
  encodePageToken,
  isVisibilityLiteral,
  paymentListQuery,
} from '../visibility';
import { type ClientContext, bounded, chargeHandle, paymentScope } from './context';
import { PaymentNotFound, ValidationError } from './errors';
import { parseOrThrow } from './failures';

/** A page of payments, newest first; `nextPageToken` when there are more. */
export interface PaymentPage {
  readonly payments: PaymentView[];
  readonly nextPageToken?: string;
}

/** Options of `PaymentsClient.list`. */
export interface ListOptions extends PaymentFilter {
  readonly pageToken?: string;
  readonly pageSize?: number;
}

/** The payment's current view; {@link PaymentNotFound} for a missing key and for another merchant's. */
export async function getPayment(ctx: ClientContext, merchantId: string, key: string): Promise<PaymentView> {
  const { workflowId } = paymentScope(merchantId, key);
  try {
    return await bounded(ctx, () => chargeHandle(ctx, workflowId).query(paymentQuery));
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new PaymentNotFound({ cause: err });
    throw err;
  }
}

/** One page of the merchant's payments from Temporal visibility, optionally by status and order id. */
export async function listPayments(
  ctx: ClientContext,
  merchantId: string,
  options: ListOptions = {},
): Promise<PaymentPage> {
  const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
  if (options.orderId !== undefined && !isVisibilityLiteral(options.orderId)) {
    throw new ValidationError([
      { path: 'orderId', message: 'a list filter cannot contain a backslash or a double quote' },
    ]);
  }
  const response = await bounded(ctx, () =>
    ctx.client.workflowService.listWorkflowExecutions({
      namespace: ctx.namespace,
      query: paymentListQuery(merchant, options),
      pageSize: options.pageSize ?? 20,
      nextPageToken: decodePageToken(options.pageToken),
    }),
  );
  const views = await bounded(ctx, () =>
    Promise.all(
      response.executions.map(async ({ execution }) => {
        if (!execution?.workflowId) return undefined;
        try {
          return await chargeHandle(ctx, execution.workflowId, execution.runId ?? undefined).query(paymentQuery);
        } catch (err) {
          if (err instanceof WorkflowNotFoundError) return undefined; // deleted since it was listed
          throw err;
        }
      }),
    ),
  );
  const nextPageToken = encodePageToken(response.nextPageToken);
  return {
    // Defence in depth: the query is scoped already.
    payments: views.filter((v): v is PaymentView => v !== undefined && v.merchantId === merchant),
    ...(nextPageToken === undefined ? {} : { nextPageToken }),
  };
}
