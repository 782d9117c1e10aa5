/**
 * Load drivers: N charges with concurrency C, each with its own Idempotency-Key, through the HTTP API (undici) or,
 * to A/B Temporal's eager workflow start, straight through a Temporal client. Every loop is bounded: by N, by
 * per-request timeouts, by a bounded number of same-key repeats, and by the run's abort signal.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, WithStartWorkflowOperation } from '@temporalio/client';
import { Pool } from 'undici';
import { chargeFingerprint } from '../src/client';
import { submitUpdate } from '../src/domain/definitions';
import { chargeWorkflowId } from '../src/domain/ids';
import { ChargeRequest, type PaymentView } from '../src/domain/payment';
import type { ChargeWorkflowInput, PaymentTimings } from '../src/domain/workflow-inputs';
import type { chargeWorkflow } from '../src/workflows';
import { forEachBounded, indices } from './bounded';

/** What happened to one payment, as its caller saw it. */
export interface PaymentOutcome {
  readonly key: string;
  readonly orderId: string;
  readonly workflowId: string;
  /** Latency of the first answer (ms). */
  readonly firstMs: number;
  /** Until a settled answer, same-key repeats included (ms). */
  readonly settledMs: number;
  /** HTTP status of the first answer ('ok' / 'error' on the direct path, 'network' when no answer came). */
  readonly firstAnswer: string;
  /** The payment status of the last answer, if any. */
  readonly finalStatus: string | undefined;
  /** Requests with the same key after the first (202 polling, or after an error). */
  readonly repeats: number;
  /** Unexpected answers: non-2xx, network errors, a status other than succeeded. */
  readonly errors: readonly string[];
  /** Direct path only: whether the server handed the first workflow task back with the start response. */
  readonly eagerlyStarted?: boolean;
  /** The payment's whole amount (minor units). */
  readonly amount: number;
  /** Its wallet part, when it had one: the provider is charged `amount - wallet.amount` (none when that is 0). */
  readonly wallet?: WalletPart;
}

/** A charge's wallet part (docs/http-api.md#payments-with-a-wallet-part). */
export interface WalletPart {
  readonly walletId: string;
  readonly amount: number;
}

/** Charges payment number `index` (the driver makes its key and body). */
export type Driver = (index: number, signal: AbortSignal) => Promise<PaymentOutcome>;

/** The outcomes in completion order and the wall-clock time of the whole batch. */
export interface LoadResult {
  readonly outcomes: PaymentOutcome[];
  readonly wallMs: number;
}

/** Runs `count` payments through `drive`, `concurrency` at a time; stops issuing new ones once `signal` aborts. */
export async function runLoad(
  drive: Driver,
  count: number,
  concurrency: number,
  signal: AbortSignal,
  firstIndex = 0,
): Promise<LoadResult> {
  const outcomes: PaymentOutcome[] = [];
  const started = performance.now();
  await forEachBounded(
    indices(firstIndex, firstIndex + count),
    concurrency,
    async (index) => {
      outcomes.push(await drive(index, signal));
    },
    { signal },
  );
  return { outcomes, wallMs: performance.now() - started };
}

/** The amount of payment number `index` (minor units, EUR). */
export const chargeAmount = (index: number): number => 1_000 + (index % 100);

/** A valid charge body: automatic capture, a unique order id, and the wallet part when given. */
export function chargeBody(scenario: string, index: number, wallet?: WalletPart): Record<string, unknown> {
  return {
    orderId: `order_${scenario}_${index}_${randomUUID().slice(0, 8)}`,
    amount: { value: chargeAmount(index), currency: 'EUR' },
    paymentMethod: 'pm_card_visa',
    capture: 'automatic',
    ...(wallet === undefined ? {} : { wallet }),
  };
}

/** How the HTTP driver reaches the API. */
export interface ApiTarget {
  readonly url: string;
  /** Bearer token; '' sends none (the peers' endpoints take none). */
  readonly token: string;
  readonly merchantId: string;
  readonly scenario: string;
  /** The workflow a payment key runs as (default the charge workflow's id; the bare-workflow peer has its own). */
  readonly workflowIdOf?: (merchantId: string, key: string) => string;
  /** The wallet part of payment number `index` of `amount` (absent, or undefined: a card-only payment). */
  readonly walletPartOf?: (index: number, amount: number) => WalletPart | undefined;
}

/** Bounds of the HTTP driver. */
export interface ApiDriverOptions {
  /** Per request: headers and body must arrive within this (ms). */
  readonly requestTimeoutMs: number;
  /** Same-key repeats after a 202 (pending/unknown), spaced by `repeatDelayMs`. */
  readonly maxPendingRepeats: number;
  /** Same-key repeats after an error (5xx, network). */
  readonly maxErrorRepeats: number;
  readonly repeatDelayMs: number;
}

export const defaultApiDriverOptions: ApiDriverOptions = {
  requestTimeoutMs: 20_000,
  maxPendingRepeats: 40,
  maxErrorRepeats: 3,
  repeatDelayMs: 250,
};

/** An HTTP driver over an undici pool of `connections` keep-alive connections; `close` the pool afterwards. */
export function apiDriver(
  target: ApiTarget,
  connections: number,
  options: ApiDriverOptions = defaultApiDriverOptions,
): { drive: Driver; close(): Promise<void> } {
  const pool = new Pool(target.url, {
    connections,
    keepAliveTimeout: 10_000,
    headersTimeout: options.requestTimeoutMs,
    bodyTimeout: options.requestTimeoutMs,
  });

  const post = async (key: string, body: string, signal: AbortSignal) => {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/payments',
      headers: {
        ...(target.token === '' ? {} : { authorization: `Bearer ${target.token}` }),
        'idempotency-key': key,
        'content-type': 'application/json',
      },
      body,
      signal,
    });
    const text = await res.body.text();
    let view: Partial<PaymentView> | undefined;
    try {
      view = JSON.parse(text) as Partial<PaymentView>;
    } catch {
      view = undefined;
    }
    return { status: res.statusCode, view, text };
  };

  const drive: Driver = async (index, signal) => {
    const key = `bench_${randomUUID()}`;
    const amount = chargeAmount(index);
    const wallet = target.walletPartOf?.(index, amount);
    const request = chargeBody(target.scenario, index, wallet);
    const body = JSON.stringify(request);
    const errors: string[] = [];
    let repeats = 0;
    let pendingRepeats = 0;
    let errorRepeats = 0;
    let firstMs: number | undefined;
    let firstAnswer = 'network';
    let finalStatus: string | undefined;
    const t0 = performance.now();
    for (;;) {
      let answer: Awaited<ReturnType<typeof post>> | undefined;
      try {
        answer = await post(key, body, signal);
      } catch (err) {
        errors.push(`network: ${err instanceof Error ? err.message : String(err)}`);
      }
      firstMs ??= performance.now() - t0;
      if (repeats === 0) firstAnswer = answer ? String(answer.status) : 'network';
      finalStatus = answer?.view?.status ?? finalStatus;
      if (answer?.status === 200) {
        if (answer.view?.status !== 'succeeded') errors.push(`200 with status ${String(answer.view?.status)}`);
        break;
      }
      if (answer?.status === 202) {
        // Pending or unknown: the caller repeats with the same key (idempotent) until the payment settles.
        if (pendingRepeats++ >= options.maxPendingRepeats) {
          errors.push(`still ${String(answer.view?.status)} after ${options.maxPendingRepeats} repeats`);
          break;
        }
      } else {
        if (answer) errors.push(`${answer.status}: ${answer.text.slice(0, 200)}`);
        if (errorRepeats++ >= options.maxErrorRepeats || signal.aborted) break;
      }
      if (signal.aborted) break;
      repeats += 1;
      await sleep(options.repeatDelayMs, undefined, { signal }).catch(() => undefined);
    }
    return {
      key,
      orderId: request.orderId as string,
      workflowId: (target.workflowIdOf ?? chargeWorkflowId)(target.merchantId, key),
      firstMs: firstMs ?? 0,
      settledMs: performance.now() - t0,
      firstAnswer,
      finalStatus,
      repeats,
      errors,
      amount,
      ...(wallet === undefined ? {} : { wallet }),
    };
  };

  return { drive, close: () => pool.close() };
}

/** What the direct driver needs: a client over the workers' NativeConnection and the scenario's task queue. */
export interface DirectTarget {
  readonly client: Client;
  readonly taskQueue: string;
  readonly merchantId: string;
  readonly timings: PaymentTimings;
  readonly scenario: string;
  readonly requestEagerStart: boolean;
  readonly rpcTimeoutMs: number;
}

/**
 * Starts the payment workflow as PaymentsClient does (same id, input, memo, policies) but as start + `submit` update
 * instead of update-with-start, so `requestEagerStart` can be set: the closest A/B of the lever without changing
 * PaymentsClient. Not retried: any failure is an error of the run.
 */
export function directDriver(target: DirectTarget): Driver {
  return async (index) => {
    const key = `bench_${randomUUID()}`;
    const request = ChargeRequest.parse(chargeBody(target.scenario, index));
    const fingerprint = chargeFingerprint(request);
    const workflowId = chargeWorkflowId(target.merchantId, key);
    const input: ChargeWorkflowInput = {
      merchantId: target.merchantId,
      key,
      fingerprint,
      request,
      timings: target.timings,
    };
    const t0 = performance.now();
    const errors: string[] = [];
    let eagerlyStarted: boolean | undefined;
    let finalStatus: string | undefined;
    try {
      const view = await target.client.connection.withDeadline(
        Date.now() + target.rpcTimeoutMs + target.timings.submitWaitMs,
        async () => {
          const handle = await target.client.workflow.start<typeof chargeWorkflow>('chargeWorkflow', {
            workflowId,
            taskQueue: target.taskQueue,
            workflowIdConflictPolicy: 'USE_EXISTING',
            workflowIdReusePolicy: 'REJECT_DUPLICATE',
            args: [input],
            memo: { fingerprint, startedBy: randomUUID() },
            requestEagerStart: target.requestEagerStart,
          });
          eagerlyStarted = handle.eagerlyStarted;
          return handle.executeUpdate(submitUpdate, { args: [{ fingerprint }] });
        },
      );
      finalStatus = view.status;
      if (view.status !== 'succeeded') errors.push(`submit answered status ${view.status}`);
    } catch (err) {
      errors.push(`temporal: ${err instanceof Error ? err.message : String(err)}`);
    }
    const ms = performance.now() - t0;
    return {
      key,
      orderId: request.orderId,
      workflowId,
      firstMs: ms,
      settledMs: ms,
      firstAnswer: errors.length === 0 ? 'ok' : 'error',
      finalStatus,
      repeats: 0,
      errors,
      amount: request.amount.value,
      ...(eagerlyStarted === undefined ? {} : { eagerlyStarted }),
    };
  };
}

/** What the server said to update-with-start (PaymentsClient's call) carrying `requestEagerStart`. */
export interface EagerUpdateWithStartProbe {
  readonly accepted: boolean;
  readonly ms: number;
  readonly status?: string;
  readonly error?: string;
}

/**
 * One charge as PaymentsClient sends it (update-with-start, USE_EXISTING, REJECT_DUPLICATE) with `requestEagerStart`
 * added: tells whether the lever could be switched on inside PaymentsClient at all.
 */
export async function probeEagerUpdateWithStart(
  target: DirectTarget,
  index: number,
): Promise<EagerUpdateWithStartProbe> {
  const key = `bench_probe_${randomUUID()}`;
  const request = ChargeRequest.parse(chargeBody(target.scenario, index));
  const fingerprint = chargeFingerprint(request);
  const input: ChargeWorkflowInput = {
    merchantId: target.merchantId,
    key,
    fingerprint,
    request,
    timings: target.timings,
  };
  const t0 = performance.now();
  try {
    const view = await target.client.connection.withDeadline(
      Date.now() + target.rpcTimeoutMs + target.timings.submitWaitMs,
      () =>
        target.client.workflow.executeUpdateWithStart(submitUpdate, {
          args: [{ fingerprint }],
          startWorkflowOperation: new WithStartWorkflowOperation<typeof chargeWorkflow>('chargeWorkflow', {
            workflowId: chargeWorkflowId(target.merchantId, key),
            taskQueue: target.taskQueue,
            workflowIdConflictPolicy: 'USE_EXISTING',
            workflowIdReusePolicy: 'REJECT_DUPLICATE',
            args: [input],
            memo: { fingerprint, startedBy: randomUUID() },
            requestEagerStart: true,
          }),
        }),
    );
    return { accepted: true, ms: performance.now() - t0, status: view.status };
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : '';
    return {
      accepted: false,
      ms: performance.now() - t0,
      error: `${err instanceof Error ? err.message : String(err)}${cause}`,
    };
  }
}
