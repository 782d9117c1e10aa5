import { encodeUnifiedSearchAttributes } from '@temporalio/common/lib/converter/payload-search-attributes';
import { paymentStatusOf } from '../../src/client/listed-status';
import { OrderIdAttr, PaymentStatusAttr } from '../../src/domain/search-attributes';
import {
  decodePageToken,
  encodePageToken,
  openPaymentsOfOrderQuery,
  paymentListQuery,
  paymentsByReferenceQuery,
  quoteLiteral,
  stuckUnknownQuery,
} from '../../src/visibility';

describe('visibility queries', () => {
  it('scope every list to the merchant and to payments only', () => {
    expect(paymentListQuery('m_1')).toBe(
      "WorkflowType = 'chargeWorkflow' AND MerchantId = 'm_1' AND ExecutionStatus != 'ContinuedAsNew'",
    );
    expect(paymentListQuery('m_1', { status: 'unknown', orderId: 'o_1' })).toBe(
      "WorkflowType = 'chargeWorkflow' AND MerchantId = 'm_1' AND ExecutionStatus != 'ContinuedAsNew' AND " +
        "PaymentStatus = 'unknown' AND OrderId = 'o_1'",
    );
  });

  it('double quotes, so an order id cannot widen the query', () => {
    expect(quoteLiteral("o' OR MerchantId = 'x")).toBe("'o'' OR MerchantId = ''x'");
  });

  it('refuse what visibility cannot match: backslashes and double quotes', () => {
    expect(() => quoteLiteral('a\\b')).toThrow(TypeError);
    expect(() => quoteLiteral('a"b')).toThrow(TypeError);
  });

  it('round-trip page tokens as base64url', () => {
    const bytes = new Uint8Array([0, 1, 2, 250, 251, 255]);
    const token = encodePageToken(bytes);

    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodePageToken(token)).toEqual(bytes);
    expect(encodePageToken(new Uint8Array())).toBeUndefined();
    expect(encodePageToken(null)).toBeUndefined();
  });

  it('build the order check, the webhook match and the sweep lookups from the same clauses', () => {
    expect(openPaymentsOfOrderQuery('m_1', 'o_1', ['pending', 'unknown'])).toBe(
      "WorkflowType = 'chargeWorkflow' AND MerchantId = 'm_1' AND ExecutionStatus != 'ContinuedAsNew' AND " +
        "OrderId = 'o_1' AND ExecutionStatus = 'Running' AND PaymentStatus IN ('pending', 'unknown')",
    );
    expect(paymentsByReferenceQuery('simulator', 'o_1')).toBe(
      "WorkflowType = 'chargeWorkflow' AND OrderId = 'o_1' AND Provider = 'simulator' AND " +
        "ExecutionStatus != 'ContinuedAsNew'",
    );
    expect(paymentsByReferenceQuery('simulator', 'o_1', 'payments')).toBe(
      "WorkflowType = 'chargeWorkflow' AND TaskQueue = 'payments' AND OrderId = 'o_1' AND Provider = 'simulator' AND " +
        "ExecutionStatus != 'ContinuedAsNew'",
    );
    expect(stuckUnknownQuery('payments', Date.UTC(2030, 0, 2, 3, 4, 5))).toBe(
      "WorkflowType = 'chargeWorkflow' AND TaskQueue = 'payments' AND ExecutionStatus = 'Running' AND " +
        "PaymentStatus = 'unknown' AND " +
        "(StartTime < '2030-01-02T03:04:05.000Z' OR UnknownSince < '2030-01-02T03:04:05.000Z')",
    );
  });

  it('read a listed payment’s status from the search attributes as the SDK encodes them', () => {
    const listed = (status?: string) => ({
      searchAttributes: {
        indexedFields: encodeUnifiedSearchAttributes(undefined, [
          { key: OrderIdAttr, value: 'o_1' },
          ...(status === undefined ? [] : [{ key: PaymentStatusAttr, value: status }]),
        ]),
      },
    });
    expect(paymentStatusOf(listed('needs_review'))).toBe('needs_review');
    expect(paymentStatusOf(listed('pending'))).toBe('pending');
    expect(paymentStatusOf(listed())).toBeUndefined();
    expect(paymentStatusOf({})).toBeUndefined();
    expect(
      paymentStatusOf({ searchAttributes: { indexedFields: { PaymentStatus: { data: new Uint8Array([1]) } } } }),
    ).toBeUndefined();
  });
});
