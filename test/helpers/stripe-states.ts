/**
 * Stripe's states for whole-stack tests. stripe-mock is stateless and answers from fixtures, reflecting only request
 * fields of the same name (never metadata), so one stripe-mock runs per state a PaymentIntent passes through
 * (`requires_capture` after a manual create, `succeeded` after a capture, a charge with `amount_refunded` after a
 * refund), each with the amounts the test names, behind a recording front (stripe-front.ts) that routes every request
 * to the one showing the state Stripe would be in. What stripe-mock cannot do (decline, fail) the front answers with
 * Stripe's recorded error bodies. See test/providers/stripe-workflows.test.ts for what is real, canned and recorded.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Stripe from 'stripe';
import { type RunningStripeMock, resolveStripeMock, startStripeMock } from '../../scripts/lib/stripe-mock';
import { type Config, loadConfig } from '../../src/config';
import type { Logger } from '../../src/providers/logging';
import { createConfiguredProviders } from '../../src/providers/registry';
import type { PaymentProvider } from '../../src/providers/types';
import { type FrontAnswer, type FrontRequest, type StripeFront, recorded, startStripeFront } from './stripe-front';

/** What Stripe would hold for a PaymentIntent, as far as the writes forwarded so far tell. */
export type StripeStep = 'authorizing' | 'captured' | 'refunded';

export interface StripeStatesOptions {
  /** Prefix of the temporary folder the fixture files are written to. */
  readonly name: string;
  /** The amounts the fixtures are written for (stripe-mock reflects the amount we send, not what was captured). */
  readonly authorized: number;
  readonly captured: number;
  /** With a `refunded` stripe-mock whose charge shows this much refunded (without it, no refund changes the state). */
  readonly refunded?: number;
  /** A PaymentMethod whose creates the front answers with Stripe's recorded `card-declined`. */
  readonly decliningCard?: string;
}

export interface StripeStates {
  readonly front: StripeFront;
  /** Payment keys whose creates the front answers with Stripe's recorded 500 (an unknown outcome). */
  readonly failingCreates: Set<string>;
  /**
   * Payment keys whose first create Stripe commits and whose answer is lost: forwarded to stripe-mock (the PaymentIntent
   * exists), then answered with the recorded 500; every later create with the key is answered 500 without forwarding
   * (Stripe replays a stored error to the same Idempotency-Key).
   */
  readonly lostAnswers: Set<string>;
  /** The PaymentIntents those creates committed, by payment key, as stripe-mock answered them. */
  readonly committed: ReadonlyMap<string, Record<string, unknown>>;
  /** The base URL of the stripe-mock showing `step`. */
  url(step: StripeStep): string;
  /** The creates the adapter sent for one payment (found by the metadata it carries). */
  createsOf(key: string): StripeFront['seen'];
  /**
   * Runs `fn` while the list of PaymentIntents is answered by a new stripe-mock whose PaymentIntent fixture is `intent`;
   * with `search`, the search (a reconcile's lookup by metadata) is answered by it too.
   */
  listing<T>(intent: Record<string, unknown>, fn: () => Promise<T>, opts?: { readonly search?: boolean }): Promise<T>;
  /** A Stripe `payment_intent.succeeded` event body for `piId` as the captured stripe-mock serves it, with what Stripe
   * would hold from our create: `amount` and the `metadata` the adapter sent (stripe-mock keeps neither). */
  succeededEvent(piId: string, metadata: Record<string, string>, amount: number): Promise<string>;
  close(): Promise<void>;
}

type Resources = Record<string, Record<string, unknown>>;

/** Starts the stripe-mocks and the front routing between them. */
export async function startStripeStates(opts: StripeStatesOptions): Promise<StripeStates> {
  const binary = await resolveStripeMock();
  const tmp = mkdtempSync(path.join(tmpdir(), `${opts.name}-`));
  /** The bundled fixtures with some resources changed; answers the file stripe-mock is started with. */
  const fixtures = (name: string, change: (r: Resources) => void): string => {
    const all = JSON.parse(readFileSync(binary.fixtures, 'utf8')) as { resources: Resources };
    change(all.resources);
    const file = path.join(tmp, `${name}.json`);
    writeFileSync(file, JSON.stringify(all));
    return file;
  };
  const { authorized, captured, refunded } = opts;
  const charge = (r: Resources, over: Record<string, unknown>) => {
    r.charge = { ...r.charge, amount: authorized, amount_captured: captured, currency: 'eur', ...over };
  };
  const succeeded = { status: 'succeeded', amount: authorized, amount_received: captured, currency: 'eur' };
  const files: Partial<Record<StripeStep, string>> = {
    authorizing: fixtures('authorizing', (r) => {
      r.payment_intent = { ...r.payment_intent, status: 'requires_capture', amount_received: 0 };
    }),
    captured: fixtures('captured', (r) => {
      r.payment_intent = { ...r.payment_intent, ...succeeded };
      charge(r, { amount_refunded: 0 });
    }),
    ...(refunded === undefined
      ? {}
      : {
          refunded: fixtures('refunded', (r) => {
            r.payment_intent = { ...r.payment_intent, ...succeeded };
            charge(r, { amount_refunded: refunded, refunded: false });
          }),
        }),
  };
  const mocks: Partial<Record<StripeStep, RunningStripeMock>> = {};
  const listingMocks: RunningStripeMock[] = [];
  /** Which stripe-mock answers the list of the next sweep (and, with `searching`, the searches). */
  let listing: RunningStripeMock | undefined;
  let searching = false;
  const failingCreates = new Set<string>();
  const lostAnswers = new Set<string>();
  const committed = new Map<string, Record<string, unknown>>();
  const intentStep = new Map<string, StripeStep>();

  const url = (step: StripeStep): string => {
    const m = mocks[step];
    if (m === undefined) throw new Error(`stripe-mock ${step} not started`);
    return m.url;
  };

  /** Each request to the stripe-mock showing the state Stripe would be in. */
  async function route(req: FrontRequest, forward: (base: string) => Promise<FrontAnswer>): Promise<FrontAnswer> {
    const intentPath = /^\/v1\/payment_intents\/([^/]+)(\/capture)?$/.exec(req.path);
    if (req.method === 'POST' && req.path === '/v1/payment_intents') {
      if (opts.decliningCard !== undefined && req.form.get('payment_method') === opts.decliningCard) {
        return recorded('card-declined');
      }
      const paymentKey = req.form.get('metadata[payment_key]') ?? '';
      if (failingCreates.has(paymentKey)) return recorded('api-error-500');
      if (lostAnswers.has(paymentKey) && committed.has(paymentKey)) return recorded('api-error-500');
      const step = req.form.get('capture_method') === 'manual' ? 'authorizing' : 'captured';
      const answer = await forward(url(step));
      if (answer.status === 200) intentStep.set((JSON.parse(answer.body) as { id: string }).id, step);
      if (lostAnswers.has(paymentKey)) {
        if (answer.status !== 200) throw new Error(`stripe-mock refused the create to commit: ${answer.body}`);
        committed.set(paymentKey, JSON.parse(answer.body) as Record<string, unknown>);
        return recorded('api-error-500');
      }
      return answer;
    }
    if (req.method === 'POST' && intentPath?.[2] === '/capture') {
      intentStep.set(intentPath[1] ?? '', 'captured');
      return forward(url('captured'));
    }
    if (req.method === 'POST' && req.path === '/v1/refunds') {
      const answer = await forward(url('captured'));
      if (answer.status === 200 && mocks.refunded) intentStep.set(req.form.get('payment_intent') ?? '', 'refunded');
      return answer;
    }
    if (req.method === 'GET' && intentPath && intentPath[1] !== 'search') {
      return forward(url(intentStep.get(intentPath[1] ?? '') ?? 'captured'));
    }
    if (req.method === 'GET' && req.path === '/v1/payment_intents') return forward(listing?.url ?? url('authorizing'));
    if (req.method === 'GET' && req.path === '/v1/payment_intents/search' && searching && listing) {
      return forward(listing.url);
    }
    // Anything else (a search): the bundled answer of a mock, validated all the same.
    return forward(url('authorizing'));
  }

  await Promise.all(
    (Object.keys(files) as StripeStep[]).map(async (k) => {
      mocks[k] = await startStripeMock(binary.path, { fixtures: files[k] });
    }),
  );
  const front = await startStripeFront(route);

  return {
    front,
    failingCreates,
    lostAnswers,
    committed,
    url,
    createsOf: (key) =>
      front.seen.filter(
        (r) => r.method === 'POST' && r.path === '/v1/payment_intents' && r.form.get('metadata[payment_key]') === key,
      ),
    async listing(intent, fn, listingOpts) {
      const mock = await startStripeMock(binary.path, {
        fixtures: fixtures(`listing-${randomUUID()}`, (r) => {
          r.payment_intent = { ...r.payment_intent, ...intent };
          r.charge = { ...r.charge, amount_refunded: 0 };
        }),
      });
      listingMocks.push(mock);
      listing = mock;
      searching = listingOpts?.search === true;
      try {
        return await fn();
      } finally {
        listing = undefined;
        searching = false;
      }
    },
    async succeededEvent(piId, metadata, amount) {
      const served = await fetch(`${url('captured')}/v1/payment_intents/${piId}`, {
        headers: { authorization: 'Bearer sk_test_webhook' },
      });
      expect(served.status).toBe(200);
      const intent = {
        ...((await served.json()) as Record<string, unknown>),
        amount,
        amount_received: amount,
        metadata,
      };
      return JSON.stringify({
        id: `evt_${randomUUID().replace(/-/g, '')}`,
        object: 'event',
        type: 'payment_intent.succeeded',
        api_version: '2026-08-26.dahlia',
        created: Math.floor(Date.now() / 1000),
        livemode: false,
        pending_webhooks: 1,
        data: { object: intent },
      });
    },
    async close() {
      await front.close();
      await Promise.all([...Object.values(mocks), ...listingMocks].map((m) => m.close()));
    },
  };
}

/** The metadata a create carried (`metadata[k]=v` in its form body), as a record. */
export const metadataSent = (create: FrontRequest | undefined): Record<string, string> =>
  Object.fromEntries(
    [...(create?.form ?? [])].flatMap(([k, v]) => {
      const m = /^metadata\[(.+)\]$/.exec(k);
      return m?.[1] ? [[m[1], v]] : [];
    }),
  );

/** A `Stripe-Signature` header for `payload`, made with Stripe's own test helper. */
export const stripeSignature = (payload: string, secret: string): string =>
  new Stripe('sk_test_signing_only').webhooks.generateTestHeaderString({ payload, secret });

/** A fresh Stripe webhook signing secret. */
export const newStripeWebhookSecret = (): string => `whsec_${randomUUID().replace(/-/g, '')}`;

/** The Stripe adapter as the worker's main builds it: `createConfiguredProviders` from the configuration. */
export interface ConfiguredStripe {
  readonly config: Config;
  readonly stripe: PaymentProvider;
  /** Closes the Stripe adapter and the configured simulator one (the world brings its own; this one is not used). */
  close(): Promise<void>;
}

/** Builds the providers from `STRIPE_SECRET_KEY`, `STRIPE_API_BASE` (`apiBase`) and `STRIPE_WEBHOOK_SECRET`. */
export function configuredStripe(apiBase: string, webhookSecret: string, logger: Logger): ConfiguredStripe {
  const config = loadConfig({
    STRIPE_SECRET_KEY: `sk_test_${randomUUID().replace(/-/g, '')}`,
    STRIPE_API_BASE: apiBase,
    STRIPE_WEBHOOK_SECRET: webhookSecret,
    PROVIDER_CONNECT_TIMEOUT_MS: '1000',
    PROVIDER_TOTAL_TIMEOUT_MS: '5000',
    LOG_LEVEL: 'silent',
  });
  const configured = createConfiguredProviders(config, logger);
  const stripe = configured.stripe;
  if (stripe === undefined) throw new Error('STRIPE_SECRET_KEY set, but no stripe provider');
  return {
    config,
    stripe,
    async close() {
      await stripe.close?.();
      await configured.simulator?.close?.();
    },
  };
}
