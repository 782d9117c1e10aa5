import { z } from 'zod';
import { ProviderCapabilities } from './provider-payment';
import { MerchantId, ChargeRequest, IdempotencyKey } from './payment';
import { ProviderOperation, RetrySpecFields, type RetryOverrides } from './retry';

const Ms = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Every delay the payment workflows use; all configurable, so a real-time test runs the whole path in seconds. */
export const PaymentTimings = z
  .strictObject({
    /** How long `submit` waits for the first provider call before answering `pending`. */
    submitWaitMs: Ms,
    /** Delays between the reconcile child's status checks; when they run out the payment goes to `needs_review`. */
    reconcileScheduleMs: z.array(Ms).min(1),
    /** How long the workflow keeps listening for late webhooks after the payment settled, before it completes. */
    settleWindowMs: Ms,
    /** A manual-capture authorization is voided when no capture arrived within this. */
    authorizationExpiryMs: Ms,
    /** Refunds are accepted for this long after capture; then the workflow completes. */
    refundWindowMs: Ms,
    /** The sweep picks up payments in `unknown` for longer than this (longer than the whole reconcile schedule). */
    unknownSweepThresholdMs: Ms,
    /**
     * Shape 3: how long the charge's first create attempt may run as a local activity, in the workflow task that
     * accepts `submit`, before the regular activity takes over with the same key. Default 3 s
     * (`defaultLocalAttemptTimeoutMs`), never longer than one attempt of the worker's create preset.
     */
    localAttemptTimeoutMs: Ms.optional(),
    /**
     * How long a payment waits for the customer (`requires_action`, 3-D Secure) before it is cancelled at the provider
     * and declined `action_expired`. Absent (inputs from before it existed): `defaultCustomerActionTimeoutMs` (customer-action.ts).
     */
    customerActionTimeoutMs: Ms.optional(),
  })
  .refine((t) => t.unknownSweepThresholdMs > reconcileWindowMs(t), {
    message: 'unknownSweepThresholdMs must exceed the whole reconcile schedule, or the sweep races the reconcile',
    path: ['unknownSweepThresholdMs'],
  });
export type PaymentTimings = z.infer<typeof PaymentTimings>;

/** Production defaults. */
export const defaultPaymentTimings: PaymentTimings = {
  submitWaitMs: 3 * SECOND,
  // Front-loaded (issue 21 §4): six checks within 16 min, so an outcome that a cool-down or a short outage kept from the
  // first checks is final within 10 min (docs/operations.md, "Time to resolution"); then hourly and 6-hourly.
  reconcileScheduleMs: [15 * SECOND, 30 * SECOND, MINUTE, 2 * MINUTE, 4 * MINUTE, 8 * MINUTE, HOUR, 6 * HOUR],
  settleWindowMs: MINUTE,
  authorizationExpiryMs: 7 * DAY,
  refundWindowMs: 30 * DAY,
  unknownSweepThresholdMs: 8 * HOUR,
};

/** The span of the reconcile schedule: the window in which a reconcile may resubmit with the original key. */
export const reconcileWindowMs = (t: { readonly reconcileScheduleMs: readonly number[] }): number =>
  t.reconcileScheduleMs.reduce((sum, ms) => sum + ms, 0);

/** Per-operation partial retry overrides, as a schema (workflow inputs are parsed at the boundary too). */
export const RetryOverridesSchema = z.partialRecord(
  ProviderOperation,
  RetrySpecFields.partial(),
) satisfies z.ZodType<RetryOverrides>;

/**
 * A provider's capabilities as the starter's configuration has them (the same settings the worker reads). The worker
 * checks them against its own adapter before any call, so a drift between the API's and the worker's configuration
 * never sends with the wrong safety: it fails the payment while nothing was sent, and after a request may have left it
 * waits for a matching worker, then reconciles.
 */
export const ProviderCapabilitiesInput = ProviderCapabilities;
export type ProviderCapabilitiesInput = ProviderCapabilities;

/**
 * The history shape of a payment, chosen by its starter and fixed for its life (it travels in the input, so replay
 * needs no patch marker). Absent: the first shape (capabilities read by a local activity, a timer for the early
 * answer, search attributes upserted at the start). `2`: the lean shape: capabilities in the input, the client's own
 * deadline for the early answer, search attributes set in the start request, one upsert per status change. `3`: the
 * lean shape in which the worker owns the provider's configuration: the input carries neither capabilities nor retry
 * presets; the charge's first workflow task runs one local activity (`firstCreateAttempt`) that returns the worker's
 * capabilities and retry presets (recorded in its marker, used for every later activity, the reconcile and the
 * continuation) and, against a provider that honours idempotency keys and has no limits of its own, makes the create's
 * first attempt (short, bounded, no local retry), so a fast provider's answer comes in the first workflow task. Any
 * failure of that attempt but a final answer hands the create to the regular activity on the provider's queue, with
 * the same key; a provider it may not run against gets its create from that activity only.
 */
export const HistoryShape = z.union([z.literal(2), z.literal(3)]);

/** Input of `chargeWorkflow`; built by the client after parsing the request and computing the fingerprint. */
export const ChargeWorkflowInput = z.strictObject({
  merchantId: MerchantId,
  key: IdempotencyKey,
  /** SHA-256 hex of `canonicalJson(significantFields(request))`. */
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/, { message: 'fingerprint must be SHA-256 hex' }),
  /** Parsed, defaults applied. */
  request: ChargeRequest,
  timings: PaymentTimings,
  retry: RetryOverridesSchema.optional(),
  capabilities: ProviderCapabilitiesInput.optional(),
  shape: HistoryShape.optional(),
  /**
   * Announce the payment's status changes and succeeded refunds to its merchant's webhook endpoint (docs/http-api.md, "Webhooks to your endpoint"),
   * chosen by the starter (config `MERCHANT_WEBHOOKS`) and fixed for the payment's life. Absent (every payment started
   * before it existed): nothing is announced, and the history has nothing new.
   */
  merchantEvents: z.literal(true).optional(),
  /**
   * Hand each key's first final answer (the charge's, each capture's and refund's) to the key-record table, chosen by a
   * starter that reads it (docs/operations.md#key-records). Absent (every payment started before it existed): nothing
   * is handed over, and the history has nothing new.
   */
  keyRecords: z.literal(true).optional(),
  /**
   * When the API accepted the charge: the view's `createdAt`. Set for a wallet-only payment, which the API answers from
   * the ledger's decision without waiting for a worker (src/client/wallet-only.ts): the API's answer and the
   * workflow's first answer are then the same body. Absent: the time of the payment's first workflow task.
   */
  createdAt: z.iso.datetime().optional(),
});
export type ChargeWorkflowInput = z.infer<typeof ChargeWorkflowInput>;
