/**
 * The Stripe adapter against stripe-mock (Stripe's official mock: its OpenAPI spec validates every request we send, in
 * the API version the `stripe` package pins, `-strict-version-check`), and against a local server answering Stripe's
 * error bodies for what stripe-mock cannot produce (it never declines, rate-limits or locks a key). PaymentIntents that
 * wait for the customer (3-D Secure) are read from fixtures changed to Stripe's shapes for them (at the end).
 *
 * stripe-mock is stateless: every PaymentIntent answer is its one fixture with the request's fields reflected (amount,
 * currency, capture_method, amount_to_capture, ids in the path). It cannot show a payment moving from authorized to
 * captured, so each scenario runs against a mock started with the fixture status that step answers in
 * (`requires_capture` for an authorization, `succeeded` for a capture); money facts the mock does not reflect
 * (amount_received) come from that fixture, and the tests say which.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync, mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import Stripe from 'stripe';
import { type RunningStripeMock, resolveStripeMock, startStripeMock } from '../../scripts/lib/stripe-mock';
import { ErrorType } from '../../src/domain/errors';
import { isProviderError } from '../../src/providers/errors';
import { StripeProvider, StripeWebhookVerifier } from '../../src/providers/stripe';
import { refusedPort } from '../helpers/net';

const logger = pino({ level: 'silent' });
const ctx = (op: string) => ({ idempotencyKey: `${op}:m1:${randomUUID()}`, attempt: 1 });

const provider = (apiBase: string, totalTimeoutMs = 5_000) =>
  new StripeProvider({ secretKey: 'sk_test_123', apiBase, connectTimeoutMs: 1_000, totalTimeoutMs, logger });

/** Writes a copy of the bundled fixtures with the PaymentIntent fixture changed. */
function fixturesWith(bundled: string, dir: string, name: string, paymentIntent: Record<string, unknown>): string {
  const all = JSON.parse(readFileSync(bundled, 'utf8')) as { resources: Record<string, Record<string, unknown>> };
  all.resources.payment_intent = { ...all.resources.payment_intent, ...paymentIntent };
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(all));
  return file;
}

const failureOf = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    if (isProviderError(err)) return err.details;
    throw err;
  }
  throw new Error('expected a provider failure');
};

describe('Stripe adapter against stripe-mock', () => {
  let authorizing: RunningStripeMock;
  let capturing: RunningStripeMock;
  let plain: RunningStripeMock;

  beforeAll(async () => {
    const mock = await resolveStripeMock();
    const dir = mkdtempSync(path.join(tmpdir(), 'stripe-mock-'));
    [authorizing, capturing, plain] = await Promise.all([
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'authorizing', { status: 'requires_capture' }),
      }),
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'capturing', { status: 'succeeded', amount_received: 1_500 }),
      }),
      startStripeMock(mock.path),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([authorizing?.close(), capturing?.close(), plain?.close()]);
  });

  it('charges with automatic capture: a succeeded payment in our shape (amount and currency as sent)', async () => {
    const stripe = provider(capturing.url);
    const result = await stripe.createPayment(
      {
        amount: 1_500,
        currency: 'EUR',
        reference: 'order-1',
        paymentMethod: 'pm_card_visa',
        capture: 'automatic',
        metadata: { merchant_id: 'm1', payment_key: 'k1' },
      },
      ctx('charge'),
    );
    expect(result).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
      payment: { status: 'succeeded', amount: 1_500, currency: 'EUR', amountCaptured: 1_500, amountRefunded: 0 },
    });
    await stripe.close();
  });

  it('authorizes with manual capture, then captures part of it (amount_to_capture)', async () => {
    const auth = provider(authorizing.url);
    const created = await auth.createPayment(
      { amount: 2_000, currency: 'EUR', reference: 'order-2', paymentMethod: 'pm_card_visa', capture: 'manual' },
      ctx('charge'),
    );
    expect(created).toMatchObject({
      outcome: 'authorized',
      payment: { status: 'authorized', amount: 2_000, amountCaptured: 0 },
    });
    if (created.outcome === 'declined') throw new Error('declined');
    const cap = provider(capturing.url);
    // stripe-mock reflects the id in the path; amount_received 1500 is the fixture's (it keeps no state).
    const captured = await cap.capturePayment(created.payment.id, { amount: 1_500 }, ctx('capture'));
    expect(captured).toMatchObject({ id: created.payment.id, status: 'succeeded', amountCaptured: 1_500 });
    await Promise.all([auth.close(), cap.close()]);
  });

  it('refunds part of a captured payment', async () => {
    const stripe = provider(plain.url);
    const refund = await stripe.refundPayment('pi_partial_refund', { amount: 300 }, ctx('refund'));
    expect(refund).toMatchObject({ paymentId: 'pi_partial_refund', amount: 300, status: 'succeeded' });
    expect(refund.id).toMatch(/^re_/);
    await stripe.close();
  });

  it('voids (cancels) an authorization and reads payments by id, by reference (Search API) and by page (sweep)', async () => {
    // Any mock validates the request; the status comes from its fixture (`succeeded` here).
    const voiding = provider(capturing.url);
    await expect(voiding.getPayment('pi_lookup')).resolves.toMatchObject({ id: 'pi_lookup', status: 'succeeded' });
    await expect(voiding.findByReference("order-'quoted'")).resolves.toHaveLength(1);
    await expect(voiding.listPayments({ createdGte: 1, createdLt: 2, limit: 10 })).resolves.toMatchObject({
      hasMore: false,
    });
    await voiding.close();
    const plainMock = provider(plain.url);
    // The bundled fixture is `requires_payment_method`: a PaymentIntent that moved no money is no payment.
    await expect(plainMock.getPayment('pi_open')).resolves.toBeNull();
    // Its `canceled` answer to a cancel would be `voided`; the bundled status is not a payment, so this is unknown.
    const voided = await failureOf(plainMock.voidPayment('pi_open', ctx('void')));
    expect(voided).toMatchObject({ type: ErrorType.OutcomeUnknown, reason: 'unexpected_status' });
    await plainMock.close();
  });

  it('a request stripe-mock refuses by the spec is ProviderRejected (the mock validates what we send)', async () => {
    const stripe = provider(plain.url);
    // Not an integer: Stripe's spec says `amount` is one; our domain never sends this, the point is the mock checks.
    const failure = await failureOf(
      stripe.createPayment(
        { amount: 10.5, currency: 'EUR', reference: 'o', paymentMethod: 'pm_card_visa', capture: 'automatic' },
        ctx('charge'),
      ),
    );
    expect(failure).toMatchObject({ type: ErrorType.ProviderRejected, status: 400, operation: 'create' });
    await stripe.close();
  });
});

interface Recorded {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

const fixturesDir = path.join(__dirname, 'fixtures', 'stripe');
const recorded: Record<string, Recorded> = Object.fromEntries(
  readdirSync(fixturesDir).map((f) => [
    f.replace(/\.json$/, ''),
    JSON.parse(readFileSync(path.join(fixturesDir, f), 'utf8')) as Recorded,
  ]),
);

describe('Stripe adapter: error shapes stripe-mock cannot produce, through the SDK', () => {
  let server: Server;
  let url: string;
  let answer: Recorded | 'reset' = recorded['api-error-500']!;
  const seen: { method: string; path: string; headers: IncomingMessage['headers']; body: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
        if (answer === 'reset') {
          req.socket.destroy();
          return;
        }
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
  });
  beforeEach(() => {
    seen.length = 0;
  });

  const charge = (stripe: StripeProvider, key = ctx('charge')) =>
    stripe.createPayment(
      {
        amount: 1_000,
        currency: 'EUR',
        reference: 'order-9',
        paymentMethod: 'pm_card_chargeDeclinedInsufficientFunds',
        capture: 'automatic',
        metadata: { merchant_id: 'm1', payment_key: 'k9' },
      },
      key,
    );

  it('card_declined (402) on a create is a decline value with the decline code, sent once with our key and metadata', async () => {
    answer = recorded['card-declined']!;
    const stripe = provider(url);
    const key = ctx('charge');
    await expect(charge(stripe, key)).resolves.toEqual({ outcome: 'declined', declineCode: 'insufficient_funds' });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['idempotency-key']).toBe(key.idempotencyKey);
    const form = new URLSearchParams(seen[0]!.body);
    expect(form.get('metadata[merchant_id]')).toBe('m1');
    expect(form.get('metadata[payment_key]')).toBe('k9');
    expect(form.get('metadata[reference]')).toBe('order-9');
    expect(form.get('currency')).toBe('eur');
    expect(form.get('confirm')).toBe('true');
    await stripe.close();
  });

  it.each([
    ['rate-limit', ErrorType.ProviderUnavailable, 429, 'rate_limit'],
    ['idempotency-key-in-use', ErrorType.ProviderUnavailable, 409, 'idempotency_key_in_use'],
    ['idempotency-mismatch', ErrorType.ProviderRejected, 400, 'idempotency_key_mismatch'],
    ['api-error-500', ErrorType.OutcomeUnknown, 500, undefined],
    ['amount-too-large-capture', ErrorType.ProviderRejected, 400, 'amount_too_large'],
  ] as const)('%s is %s (HTTP %s), sent exactly once: the SDK does not retry', async (name, type, status, code) => {
    answer = recorded[name]!;
    const stripe = provider(url);
    const failure = await failureOf(stripe.capturePayment('pi_1', { amount: 500 }, ctx('capture')));
    expect(failure).toMatchObject({ type, status, operation: 'capture', ...(code === undefined ? {} : { code }) });
    expect(seen).toHaveLength(1);
    await stripe.close();
  });

  it("a rate limit's Retry-After is capped at the adapter's maxRetryAfterMs (one answer cannot hold the provider for minutes)", async () => {
    const rateLimit = recorded['rate-limit']!;
    answer = { ...rateLimit, headers: { ...rateLimit.headers, 'retry-after': '180' } };
    const stripe = new StripeProvider({
      secretKey: 'sk_test_123',
      apiBase: url,
      connectTimeoutMs: 1_000,
      totalTimeoutMs: 5_000,
      maxRetryAfterMs: 4_000,
      logger,
    });
    const failure = await failureOf(stripe.capturePayment('pi_1', { amount: 500 }, ctx('capture')));
    expect(failure).toMatchObject({ type: ErrorType.ProviderUnavailable, status: 429, retryAfterMs: 4_000 });
    await stripe.close();
  });

  it('a 404 resource_missing on a lookup by id is null', async () => {
    answer = recorded['resource-missing']!;
    const stripe = provider(url);
    await expect(stripe.getPayment('pi_missing')).resolves.toBeNull();
    await stripe.close();
  });

  it('a connection reset after the request was sent is OutcomeUnknown, and the SDK does not resend it', async () => {
    answer = 'reset';
    const stripe = provider(url);
    const failure = await failureOf(charge(stripe));
    expect(failure).toMatchObject({ type: ErrorType.OutcomeUnknown, operation: 'create', reason: 'reset_after_send' });
    // stripe-node retries a closed connection once even at maxNetworkRetries 0; our transport's failure carries no
    // socket error code, so it does not: one request at the server.
    expect(seen).toHaveLength(1);
    await stripe.close();
  });

  it('a refused connection is NotSent: the request provably never left', async () => {
    const stripe = provider(`http://127.0.0.1:${await refusedPort()}`);
    const failure = await failureOf(charge(stripe));
    expect(failure).toMatchObject({ type: ErrorType.NotSent, operation: 'create', reason: 'connect_refused' });
    await stripe.close();
  });

  it('a 200 whose body is not JSON is OutcomeUnknown (it may have had its effect)', async () => {
    answer = { status: 200, headers: {}, body: undefined };
    const stripe = provider(url);
    // JSON.stringify(undefined) is undefined: the server answers an empty body.
    const failure = await failureOf(charge(stripe));
    expect(failure).toMatchObject({ type: ErrorType.OutcomeUnknown, operation: 'create' });
    await stripe.close();
  });
});

// PaymentIntents that wait for the customer (3-D Secure): stripe-mock answers its PaymentIntent fixture changed to what
// Stripe shows for one (`requires_action` with `next_action.redirect_to_url`) and for one whose customer failed the
// authentication (`requires_payment_method` with `payment_intent_authentication_failure`); requests are still
// validated against Stripe's spec.
const REDIRECT = 'https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_1&payment_intent=pi_1';

const input = {
  amount: 2_000,
  currency: 'EUR',
  reference: 'order-3ds',
  paymentMethod: 'pm_card_authenticationRequired',
  capture: 'automatic',
} as const;

describe('Stripe adapter: PaymentIntents that wait for the customer (stripe-mock)', () => {
  let waiting: RunningStripeMock;
  let failedAuth: RunningStripeMock;

  beforeAll(async () => {
    const mock = await resolveStripeMock();
    const dir = mkdtempSync(path.join(tmpdir(), 'stripe-mock-3ds-'));
    [waiting, failedAuth] = await Promise.all([
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'waiting', {
          status: 'requires_action',
          next_action: { type: 'redirect_to_url', redirect_to_url: { url: REDIRECT, return_url: 'https://shop/ret' } },
        }),
      }),
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'failed', {
          status: 'requires_payment_method',
          last_payment_error: { type: 'invalid_request_error', code: 'payment_intent_authentication_failure' },
        }),
      }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([waiting?.close(), failedAuth?.close()]);
  });

  it('a create answered requires_action + redirect_to_url is requires_action with nextAction, not a decline', async () => {
    const stripe = provider(waiting.url);
    const result = await stripe.createPayment(input, ctx('create'));
    expect(result).toMatchObject({
      outcome: 'requires_action',
      payment: { status: 'requires_action', nextAction: { type: 'redirect_to_url', url: REDIRECT }, amountCaptured: 0 },
    });
    // A look-up (the wait's schedule) reads the same: still waiting, not "no payment".
    await expect(stripe.getPayment('pi_waiting')).resolves.toMatchObject({
      id: 'pi_waiting',
      status: 'requires_action',
      nextAction: { url: REDIRECT },
    });
    await stripe.close();
  });

  it('a failed authentication is a decline authentication_failed on create, and failed on a look-up', async () => {
    const stripe = provider(failedAuth.url);
    await expect(stripe.createPayment(input, ctx('create'))).resolves.toEqual({
      outcome: 'declined',
      declineCode: 'authentication_failed',
    });
    await expect(stripe.getPayment('pi_failed')).resolves.toMatchObject({
      status: 'failed',
      declineCode: 'authentication_failed',
    });
    await stripe.close();
  });
});

describe('Stripe webhooks of a PaymentIntent whose customer failed the authentication', () => {
  const secret = 'whsec_3ds_test';
  const verifier = new StripeWebhookVerifier({ secret, toleranceS: 300 });
  const signed = (type: string, object: Record<string, unknown>) => {
    const raw = JSON.stringify({ id: `evt_${randomUUID()}`, type, created: 1_700_000_000, data: { object } });
    const header = new Stripe('sk_test_123').webhooks.generateTestHeaderString({ payload: raw, secret });
    return verifier.verify(raw, { 'stripe-signature': header });
  };
  const intent = {
    id: 'pi_3ds',
    status: 'requires_payment_method',
    amount: 2_000,
    amount_received: 0,
    currency: 'eur',
    created: 1_700_000_000,
    metadata: { merchant_id: 'm1', payment_key: 'k1', reference: 'order-3ds' },
  };

  it('payment_intent.payment_failed with payment_intent_authentication_failure is payment.failed authentication_failed', () => {
    const verdict = signed('payment_intent.payment_failed', {
      ...intent,
      last_payment_error: { type: 'invalid_request_error', code: 'payment_intent_authentication_failure' },
    });
    expect(verdict).toMatchObject({
      kind: 'event',
      event: {
        type: 'payment.failed',
        payment: { id: 'pi_3ds', status: 'failed', declineCode: 'authentication_failed' },
      },
    });
  });

  it('a card refused after confirmation (no authentication involved) stays no payment: ignored', () => {
    const verdict = signed('payment_intent.payment_failed', {
      ...intent,
      last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds' },
    });
    expect(verdict).toMatchObject({ kind: 'ignored' });
  });
});
