import { ErrorType } from '../../domain/errors';
import type { AttemptRecord } from '../../domain/retry';
import type { CallContext, LookupContext, PaymentProvider } from '../../providers/types';
import { failureDetailsOf } from './failure';

/**
 * The provider as one attempt uses it: every call carries the activity's cancellation (so an attempt that Temporal
 * gave up, or a cancelled workflow, stops sending), and every write heartbeats the attempt record right before it is
 * sent and right after its outcome is classified, so the next attempt knows what this one may have done. `wrote`
 * says whether this attempt's write reached for the provider (the breaker's probe is decided only by one that did).
 */
export const attemptProvider = (
  provider: PaymentProvider,
  base: LookupContext,
  record: { current: AttemptRecord; wrote: boolean },
  beat: () => void,
): PaymentProvider => {
  const readCtx = (ctx?: LookupContext): LookupContext => ({ ...base, ...ctx, ...withSignal(base.signal) });
  const writeCtx = (ctx: CallContext): CallContext => ({ ...ctx, ...withSignal(base.signal) });
  const write = async <T>(send: () => Promise<T>): Promise<T> => {
    record.current = { ...record.current, inFlight: true };
    beat();
    const sends = record.current.sends ?? 0;
    try {
      const value = await send();
      record.current = { ...record.current, everSent: true, inFlight: false, sends: sends + 1 };
      record.wrote = true;
      return value;
    } catch (err) {
      const { type, reason } = failureDetailsOf(err, 'create');
      // Refused at connect, it still tested the provider; cut off by our own cancellation first, it did not.
      record.wrote ||= !(type === ErrorType.NotSent && reason === 'cancelled');
      const left = type !== ErrorType.NotSent && type !== ErrorType.CircuitOpen;
      record.current = {
        everSent: record.current.everSent || left,
        everUnknown: record.current.everUnknown || type === ErrorType.OutcomeUnknown,
        inFlight: false,
        sends: left ? sends + 1 : sends,
      };
      throw err;
    } finally {
      beat();
    }
  };
  return {
    name: provider.name,
    capabilities: provider.capabilities,
    createPayment: (input, ctx) => write(() => provider.createPayment(input, writeCtx(ctx))),
    capturePayment: (id, body, ctx) => write(() => provider.capturePayment(id, body, writeCtx(ctx))),
    voidPayment: (id, ctx) => write(() => provider.voidPayment(id, writeCtx(ctx))),
    refundPayment: (id, body, ctx) => write(() => provider.refundPayment(id, body, writeCtx(ctx))),
    getPayment: (id, ctx) => provider.getPayment(id, readCtx(ctx)),
    findByIdempotencyKey: (key, ctx) => provider.findByIdempotencyKey(key, readCtx(ctx)),
    findByReference: (reference, ctx) => provider.findByReference(reference, readCtx(ctx)),
    listPayments: (query, ctx) => provider.listPayments(query, readCtx(ctx)),
  };
};

const withSignal = (signal: AbortSignal | undefined): { signal?: AbortSignal } =>
  signal === undefined ? {} : { signal };
