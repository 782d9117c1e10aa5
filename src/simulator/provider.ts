import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SimContext } from './context';
import { fingerprint, type NewClaim } from './idempotency';
import { BadRequest, bearerToken, errorReply, header, readJson, send, validationReply, type Reply } from './http';
import { capturePayment, createPayment, refundPayment, voidPayment, type Effect, type Outcome } from './payments';
import {
  CapturePaymentBody,
  CreatePaymentBody,
  ListPaymentsQuery,
  RefundPaymentBody,
  VoidPaymentBody,
  type Json,
  type Operation,
} from './schemas';
import type { PaymentRecord } from './state';
import { toPayment } from './store';
import { newEventId, type WebhookEvent, type WebhookEventType } from './webhooks';

/** A provider API route: the operation, the path it fingerprints, and the payment it addresses. */
export interface ProviderRoute {
  operation: Operation;
  path: string;
  paymentId?: string;
}

const PAYMENT_PATH = /^\/v1\/payments\/([^/]+)(?:\/(capture|void|cancel|refunds))?$/;
/** `cancel` is a void by its Stripe name (it also cancels a payment waiting for the customer): one operation. */
const ACTIONS = { capture: 'capture', void: 'void', cancel: 'void', refunds: 'refund' } as const;

/** Maps a request to a provider route; 'method_not_allowed' for a known path with the wrong method. */
export function matchProviderRoute(method: string, path: string): ProviderRoute | 'method_not_allowed' | undefined {
  if (path === '/v1/payments') {
    if (method === 'POST') return { operation: 'create', path };
    return method === 'GET' ? { operation: 'lookup', path } : 'method_not_allowed';
  }
  const m = PAYMENT_PATH.exec(path);
  if (!m?.[1]) return undefined;
  let paymentId: string;
  try {
    paymentId = decodeURIComponent(m[1]);
  } catch {
    return undefined;
  }
  const action = m[2] as keyof typeof ACTIONS | undefined;
  if (action === undefined) return method === 'GET' ? { operation: 'lookup', path, paymentId } : 'method_not_allowed';
  return method === 'POST' ? { operation: ACTIONS[action], path, paymentId } : 'method_not_allowed';
}

/** What to do with a request once faults are settled: answer now, or run the operation (holding a key claim). */
type Decision =
  { kind: 'reply'; reply: Reply; replayed?: boolean } | { kind: 'run'; run: () => Outcome; claim?: NewClaim };

const eventType = (effect: Effect): WebhookEventType => {
  switch (effect.operation) {
    case 'create':
      return effect.payment.status === 'succeeded' ? 'payment.succeeded' : 'payment.authorized';
    case 'capture':
      return 'payment.succeeded';
    case 'void':
      return 'payment.voided';
    case 'refund':
      return 'refund.succeeded';
  }
};

/** Serves one provider API request: auth, ledger, faults, validation, idempotency, the operation, webhooks. */
export async function handleProviderRequest(
  ctx: SimContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: ProviderRoute,
  url: URL,
): Promise<void> {
  const apiKey = bearerToken(req);
  if (!apiKey) {
    send(res, errorReply(401, 'authentication_error', 'api_key_missing', 'send Authorization: Bearer <api key>'));
    return;
  }
  let body: Json = {};
  let badBody: Reply | undefined;
  if (route.operation !== 'lookup') {
    try {
      body = await readJson(req);
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      badBody = err.reply;
    }
  }

  // From here to the key claim in decide() nothing awaits, so a request that hits a fault and claims its key does
  // both before any concurrent duplicate is looked at.
  const key =
    route.operation === 'lookup'
      ? url.searchParams.get('idempotency_key') || null
      : (header(req, 'idempotency-key') ?? null);
  const payment = route.paymentId === undefined ? undefined : ctx.store.payment(apiKey, route.paymentId);
  const reference = referenceOf(route, body, payment, url);
  const entry = ctx.store.recordRequest({
    api_key: apiKey,
    operation: route.operation,
    idempotency_key: key,
    reference,
    at: ctx.store.nowS(),
    at_ms: ctx.store.nowMs(),
    status: null,
  });
  const fault = ctx.faults.match({ operation: route.operation, reference, key });
  if (fault) ctx.store.updateRequest(entry, { fault: fault.fault });
  if (fault?.fault === 'reset_before_commit') {
    req.socket.resetAndDestroy();
    return;
  }
  if (fault?.fault === 'status') {
    const reply = errorReply(fault.status, 'api_error', 'simulated_fault', `simulated ${fault.status}`);
    if (fault.retry_after_s !== undefined) reply.headers = { 'retry-after': String(fault.retry_after_s) };
    ctx.store.updateRequest(entry, { status: reply.status });
    send(res, reply);
    return;
  }

  const decision = badBody ? { kind: 'reply' as const, reply: badBody } : decide(ctx, apiKey, route, body, key, url);
  const claim = decision.kind === 'run' ? decision.claim : undefined;
  try {
    if (fault?.fault === 'latency') await sleep(fault.latency_ms, undefined, { signal: ctx.signal });
    const reply = decision.kind === 'run' ? await runAndCommit(ctx, apiKey, key, decision) : decision.reply;
    if (decision.kind === 'reply' && decision.replayed) ctx.store.updateRequest(entry, { replayed: true });
    if (fault?.fault === 'commit_then_drop') {
      req.socket.destroy();
      return;
    }
    ctx.store.updateRequest(entry, { status: reply.status });
    send(res, reply);
  } finally {
    // A no-op after complete(); otherwise (closed mid-latency, a bug) the key is freed with nothing stored.
    if (claim) ctx.idempotency.release(claim);
  }
}

/** Runs the operation, stores its response for the key, records the effect, saves, then announces the effect. */
async function runAndCommit(
  ctx: SimContext,
  apiKey: string,
  key: string | null,
  decision: Extract<Decision, { kind: 'run' }>,
): Promise<Reply> {
  const { reply, effect } = decision.run();
  if (decision.claim) ctx.idempotency.complete(decision.claim, { status: reply.status, body: reply.body });
  // The event snapshots the payment now: a concurrent operation may change it while the state is saved.
  const event = effect && commitEffect(ctx, apiKey, key, effect);
  if (decision.claim || effect) await ctx.persist();
  // Announce only what is durable.
  if (event) ctx.webhooks.dispatch(apiKey, ctx.store.merchant(apiKey), event);
  return reply;
}

/** The reference faults and the ledger see: the body's for create, the payment's otherwise, the query's for lists. */
function referenceOf(route: ProviderRoute, body: Json, payment: PaymentRecord | undefined, url: URL): string | null {
  if (route.operation === 'create') {
    const ref = body !== null && typeof body === 'object' && !Array.isArray(body) ? body.reference : undefined;
    return typeof ref === 'string' ? ref : null;
  }
  if (payment) return payment.reference;
  return route.paymentId === undefined ? url.searchParams.get('reference') || null : null;
}

/** Validates the request and claims its idempotency key. Synchronous: see IdempotencyTable.claim. */
function decide(
  ctx: SimContext,
  apiKey: string,
  route: ProviderRoute,
  body: Json,
  key: string | null,
  url: URL,
): Decision {
  const run = operationFor(ctx, apiKey, route, body, key, url);
  if (typeof run !== 'function') return { kind: 'reply', reply: run };
  const merchant = ctx.store.merchant(apiKey);
  if (route.operation === 'lookup' || key === null || !merchant.idempotency) return { kind: 'run', run };
  if (key.length > 255 || !/^[\x20-\x7e]+$/.test(key)) {
    return {
      kind: 'reply',
      reply: errorReply(400, 'invalid_request_error', 'idempotency_key_invalid', 'keys are 1-255 printable ASCII'),
    };
  }
  const claim = ctx.idempotency.claim(apiKey, key, fingerprint(route.operation, route.path, body), merchant.key_ttl_s);
  switch (claim.kind) {
    case 'new':
      return { kind: 'run', run, claim };
    case 'replay':
      return {
        kind: 'reply',
        replayed: true,
        reply: { ...claim.response, headers: { 'idempotent-replayed': 'true' } },
      };
    case 'mismatch':
      return {
        kind: 'reply',
        reply: errorReply(
          422,
          'idempotency_error',
          'idempotency_key_mismatch',
          'this key was used with other parameters',
        ),
      };
    case 'in_use':
      return {
        kind: 'reply',
        reply: errorReply(409, 'idempotency_error', 'idempotency_key_in_use', 'a request with this key is in flight'),
      };
  }
}

/** The operation bound to its validated input, or the 400 that refuses the input. */
function operationFor(
  ctx: SimContext,
  apiKey: string,
  route: ProviderRoute,
  body: Json,
  key: string | null,
  url: URL,
): (() => Outcome) | Reply {
  const { store } = ctx;
  const id = route.paymentId ?? '';
  switch (route.operation) {
    case 'create': {
      const input = CreatePaymentBody.safeParse(body);
      return input.success
        ? () => createPayment(store, apiKey, key, input.data, (paymentId) => customerActionUrl(ctx, paymentId))
        : validationReply(input.error, body);
    }
    case 'capture': {
      const input = CapturePaymentBody.safeParse(body);
      return input.success ? () => capturePayment(store, apiKey, id, input.data) : validationReply(input.error, body);
    }
    case 'void': {
      const input = VoidPaymentBody.safeParse(body);
      return input.success ? () => voidPayment(store, apiKey, id) : validationReply(input.error, body);
    }
    case 'refund': {
      const input = RefundPaymentBody.safeParse(body);
      return input.success ? () => refundPayment(store, apiKey, id, input.data) : validationReply(input.error, body);
    }
    case 'lookup':
      return route.paymentId === undefined ? listFor(ctx, apiKey, url) : () => getOne(ctx, apiKey, id);
  }
}

function getOne(ctx: SimContext, apiKey: string, id: string): Outcome {
  const payment = ctx.store.payment(apiKey, id);
  if (payment) return { reply: { status: 200, body: toPayment(payment) } };
  return {
    reply: errorReply(404, 'invalid_request_error', 'resource_missing', `no such payment: ${id}`, { param: 'id' }),
  };
}

function listFor(ctx: SimContext, apiKey: string, url: URL): (() => Outcome) | Reply {
  const raw = Object.fromEntries(url.searchParams);
  const query = ListPaymentsQuery.safeParse(raw);
  if (!query.success) return validationReply(query.error, raw);
  return () => {
    const page = ctx.store.listPayments(apiKey, query.data);
    if (page === 'unknown_cursor') {
      return {
        reply: errorReply(400, 'invalid_request_error', 'resource_missing', 'starting_after is not a known payment', {
          param: 'starting_after',
        }),
      };
    }
    return { reply: { status: 200, body: { data: page.data.map(toPayment), has_more: page.has_more } } };
  };
}

/** Where the customer authenticates a payment waiting for them (the simulator's control endpoint plays that page). */
const customerActionUrl = (ctx: SimContext, paymentId: string): string =>
  `${ctx.baseUrl}/_sim/payments/${encodeURIComponent(paymentId)}/authenticate`;

/** Records a committed effect in the ledger and builds the webhook event that announces it. */
export function commitEffect(ctx: SimContext, apiKey: string, key: string | null, effect: Effect): WebhookEvent {
  const at = ctx.store.nowS();
  ctx.store.recordEffect({
    api_key: apiKey,
    operation: effect.operation,
    idempotency_key: key,
    reference: effect.payment.reference,
    payment_id: effect.payment.id,
    amount: effect.amount,
    at,
  });
  const payment = toPayment(effect.payment);
  const refund = effect.refund && {
    id: effect.refund.id,
    payment_id: effect.refund.payment_id,
    amount: effect.refund.amount,
    status: effect.refund.status,
    created: effect.refund.created,
  };
  return { id: newEventId(), type: eventType(effect), created: at, data: refund ? { payment, refund } : { payment } };
}
