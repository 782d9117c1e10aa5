import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { SimContext } from './context';
import type { FaultRuleView } from './faults';
import { BadRequest, errorReply, readJson, send, validationReply, type Reply } from './http';
import {
  AuthenticateBody,
  ClockAdvanceBody,
  FaultsBody,
  MerchantSettingsBody,
  type FaultsBodyInput,
  type Json,
  type MerchantSettings,
  type MerchantSettingsInput,
} from './schemas';
import { authenticatePayment } from './payments';
import { commitEffect } from './provider';
import type { Ledger } from './state';
import { toPayment } from './store';
import { newEventId, type WebhookDelivery } from './webhooks';

/** The simulator's own controls, the same over HTTP (`/_sim/...`) and in-process (tests). Inputs are snake_case. */
export interface SimulatorControls {
  /** Replaces a merchant's settings (missing fields take their defaults). Throws a ZodError on invalid input. */
  setMerchant(apiKey: string, settings: MerchantSettingsInput): Promise<MerchantSettings>;
  /** A merchant's settings, defaults when never set. */
  merchant(apiKey: string): MerchantSettings;
  /** Adds fault rules (a seed restarts the PRNG); answers every rule. Throws a ZodError on invalid input. */
  addFaults(body: FaultsBodyInput): FaultRuleView[];
  /** Removes every fault rule. */
  clearFaults(): void;
  /** Every fault rule with its remaining hits. */
  faults(): FaultRuleView[];
  /** A deep copy of the effect and request ledger, optionally of one api key only. */
  ledger(apiKey?: string): Ledger;
  /** Moves the simulator clock forward; answers the new time in unix seconds. */
  advanceClock(seconds: number): Promise<number>;
  /** The simulator time in unix seconds. */
  nowS(): number;
  /** Releases held webhook events and resolves when every queued delivery is done. */
  flushWebhooks(): Promise<void>;
  /** Every webhook delivery attempt so far. */
  webhookDeliveries(): WebhookDelivery[];
  /** Forgets merchants, payments, keys, faults, the ledger and the clock offset. */
  reset(): Promise<void>;
  /**
   * Plays the customer of a payment waiting for them (`requires_action`): `succeeded` authorizes it (captures it with
   * automatic capture), `failed` fails it (`authentication_failed`); a webhook follows either way. Answers the payment,
   * 404 for an unknown id, 400 when it does not wait. Throws a ZodError on invalid input.
   */
  authenticate(paymentId: string, result: 'succeeded' | 'failed'): Promise<Reply>;
}

/** Builds the controls over a simulator context. */
export function createControls(ctx: SimContext): SimulatorControls {
  return {
    async setMerchant(apiKey, settings) {
      const parsed = MerchantSettingsBody.parse(settings);
      ctx.store.setMerchant(apiKey, parsed);
      await ctx.persist();
      return parsed;
    },
    merchant: (apiKey) => ctx.store.merchant(apiKey),
    addFaults(body) {
      const parsed = FaultsBody.parse(body);
      ctx.faults.add(parsed.rules, parsed.seed);
      return ctx.faults.list();
    },
    clearFaults: () => ctx.faults.clear(),
    faults: () => ctx.faults.list(),
    ledger(apiKey) {
      const all = ctx.store.ledger();
      if (apiKey === undefined) return all;
      return {
        effects: all.effects.filter((e) => e.api_key === apiKey),
        requests: all.requests.filter((r) => r.api_key === apiKey),
      };
    },
    async advanceClock(seconds) {
      const now = ctx.store.advanceClock(ClockAdvanceBody.parse({ seconds }).seconds);
      await ctx.persist();
      return now;
    },
    nowS: () => ctx.store.nowS(),
    flushWebhooks: () => ctx.webhooks.flush(),
    webhookDeliveries: () => ctx.webhooks.deliveries(),
    async reset() {
      ctx.store.reset();
      ctx.idempotency.clearInFlight();
      ctx.faults.clear();
      await ctx.persist();
    },
    authenticate: (paymentId, result) => authenticate(ctx, paymentId, AuthenticateBody.parse({ result }).result),
  };
}

/** The customer's answer: the payment changes, its effect (if any) is recorded, saved, then announced. */
async function authenticate(ctx: SimContext, paymentId: string, result: 'succeeded' | 'failed'): Promise<Reply> {
  const { reply, effect } = authenticatePayment(ctx.store, paymentId, result);
  const payment = ctx.store.paymentById(paymentId);
  if (reply.status !== 200 || !payment) return reply;
  const event = effect
    ? commitEffect(ctx, payment.api_key, payment.idempotency_key, effect)
    : {
        id: newEventId(),
        type: 'payment.failed' as const,
        created: ctx.store.nowS(),
        data: { payment: toPayment(payment) },
      };
  await ctx.persist();
  ctx.webhooks.dispatch(payment.api_key, ctx.store.merchant(payment.api_key), event);
  return reply;
}

const MERCHANT_PATH = /^\/_sim\/merchants\/([^/]+)$/;
const AUTHENTICATE_PATH = /^\/_sim\/payments\/([^/]+)\/authenticate$/;

/** Serves `/_sim/...`; control endpoints need no auth (development and tests only). */
export async function handleControlRequest(
  controls: SimulatorControls,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const method = req.method ?? 'GET';
  let body: Json = {};
  let reply: Reply;
  try {
    if (method === 'POST' || method === 'PUT') body = await readJson(req);
    reply = await route(controls, method, url.pathname, url.searchParams, body);
  } catch (err) {
    if (err instanceof BadRequest) reply = err.reply;
    else if (err instanceof z.ZodError) reply = validationReply(err, body);
    else throw err;
  }
  send(res, reply);
}

const ok = (body: Json): Reply => ({ status: 200, body });

async function route(
  controls: SimulatorControls,
  method: string,
  path: string,
  query: URLSearchParams,
  body: Json,
): Promise<Reply> {
  const merchant = MERCHANT_PATH.exec(path);
  if (merchant?.[1]) {
    const apiKey = safeDecode(merchant[1]);
    if (method === 'PUT') return ok(await controls.setMerchant(apiKey, body as MerchantSettingsInput));
    if (method === 'GET') return ok(controls.merchant(apiKey));
    return notAllowed();
  }
  const authenticating = AUTHENTICATE_PATH.exec(path);
  if (authenticating?.[1]) {
    if (method !== 'POST') return notAllowed();
    return controls.authenticate(safeDecode(authenticating[1]), AuthenticateBody.parse(body).result);
  }
  switch (`${method} ${path}`) {
    case 'GET /_sim/health':
      return ok({ ok: true });
    case 'POST /_sim/faults':
      return ok({ rules: toJson(controls.addFaults(body as FaultsBodyInput)) });
    case 'GET /_sim/faults':
      return ok({ rules: toJson(controls.faults()) });
    case 'DELETE /_sim/faults':
      controls.clearFaults();
      return ok({ rules: [] });
    case 'GET /_sim/ledger':
      return ok(controls.ledger(query.get('api_key') ?? undefined));
    case 'POST /_sim/clock/advance':
      return ok({ now: await controls.advanceClock(ClockAdvanceBody.parse(body).seconds) });
    case 'GET /_sim/clock':
      return ok({ now: controls.nowS() });
    case 'GET /_sim/webhooks':
      return ok({ deliveries: toJson(controls.webhookDeliveries()) });
    case 'POST /_sim/webhooks/flush':
      await controls.flushWebhooks();
      return ok({ deliveries: toJson(controls.webhookDeliveries()) });
    case 'POST /_sim/reset':
      await controls.reset();
      return ok({ ok: true });
    default:
      return errorReply(404, 'invalid_request_error', 'route_not_found', `no route ${method} ${path}`);
  }
}

const safeDecode = (s: string): string => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

const notAllowed = (): Reply => errorReply(405, 'invalid_request_error', 'method_not_allowed', 'method not allowed');

/** Drops `undefined` fields, which JSON has no room for. */
const toJson = (value: unknown): Json => JSON.parse(JSON.stringify(value)) as Json;
