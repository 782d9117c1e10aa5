import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MerchantSettings } from './schemas';
import { signWebhook, SIGNATURE_HEADER } from './signature';
import type { Payment, Refund } from './state';

/** Webhook event types, one per effect kind (`payment.failed`: a customer's authentication failed, no effect). */
export type WebhookEventType =
  'payment.succeeded' | 'payment.authorized' | 'payment.voided' | 'payment.failed' | 'refund.succeeded';

/** A webhook event body. */
export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created: number;
  data: { payment: Payment; refund?: Refund };
}

/** One delivery attempt, as `GET /_sim/webhooks` shows it. */
export interface WebhookDelivery {
  event_id: string;
  type: WebhookEventType;
  attempt: number;
  /** The receiver's status; null on a network error or timeout. */
  status: number | null;
  error?: string;
  /** Wall-clock unix milliseconds. */
  at_ms: number;
}

/** Retry bounds: `attempts` in all, waiting `baseDelayMs * 2^(n-1)` after the n-th failure. */
export interface WebhookRetry {
  attempts: number;
  baseDelayMs: number;
}

interface Job {
  event: WebhookEvent;
  body: string;
  url: string;
  secret: string;
}

/** How long reordered events are held when the merchant set no `webhook_delay_ms`. */
const DEFAULT_REORDER_WINDOW_MS = 100;
const ATTEMPT_TIMEOUT_MS = 5_000;

/**
 * Delivers webhook events in the background: at least once, retried with exponential backoff, one queue per
 * merchant so events leave in effect order unless the merchant asked for reordering.
 */
export class WebhookDispatcher {
  private readonly queues = new Map<string, Promise<void>>();
  /** Held deliveries (delay or reorder window) with the function that releases them now. */
  private readonly held = new Map<NodeJS.Timeout, () => void>();
  private readonly reorderBuffers = new Map<string, Job[]>();
  private readonly log: WebhookDelivery[] = [];
  private readonly abort = new AbortController();
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

  constructor(private readonly retry: WebhookRetry) {}

  /** Schedules the event for the merchant's webhook; returns at once. */
  dispatch(queueKey: string, merchant: MerchantSettings, event: WebhookEvent): void {
    if (this.abort.signal.aborted || !merchant.webhook_url || !merchant.webhook_secret) return;
    const job: Job = { event, body: JSON.stringify(event), url: merchant.webhook_url, secret: merchant.webhook_secret };
    const jobs = merchant.webhook_duplicate ? [job, job] : [job];
    if (merchant.webhook_reorder) {
      const buffer = this.reorderBuffers.get(queueKey);
      if (buffer) {
        buffer.push(...jobs);
        return;
      }
      this.reorderBuffers.set(queueKey, [...jobs]);
      this.hold(merchant.webhook_delay_ms ?? DEFAULT_REORDER_WINDOW_MS, () => {
        const batch = this.reorderBuffers.get(queueKey) ?? [];
        this.reorderBuffers.delete(queueKey);
        this.enqueue(queueKey, batch.reverse());
      });
    } else if (merchant.webhook_delay_ms) {
      this.hold(merchant.webhook_delay_ms, () => this.enqueue(queueKey, jobs));
    } else {
      this.enqueue(queueKey, jobs);
    }
  }

  /** Releases every held event now and resolves when all queued deliveries are done (delivered or given up). */
  async flush(): Promise<void> {
    // Queues can grow while we wait (a new effect, a retry chain): loop until nothing is held or queued.
    for (;;) {
      for (const [timer, release] of [...this.held]) {
        clearTimeout(timer);
        this.held.delete(timer);
        release();
      }
      if (this.queues.size === 0) return;
      await Promise.all(this.queues.values());
    }
  }

  /** Every delivery attempt so far. */
  deliveries(): WebhookDelivery[] {
    return this.log.map((d) => ({ ...d }));
  }

  /** Stops everything: held events are dropped, pending retries cancelled, in-flight requests aborted. */
  async close(): Promise<void> {
    this.abort.abort();
    for (const timer of this.held.keys()) clearTimeout(timer);
    this.held.clear();
    this.reorderBuffers.clear();
    await Promise.all(this.queues.values());
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private hold(ms: number, release: () => void): void {
    const timer = setTimeout(() => {
      this.held.delete(timer);
      release();
    }, ms);
    this.held.set(timer, release);
  }

  private enqueue(queueKey: string, jobs: Job[]): void {
    const tail = (this.queues.get(queueKey) ?? Promise.resolve())
      .then(async () => {
        for (const job of jobs) await this.deliver(job);
      })
      // deliver() reports failures in the log; a bug must not break the chain for later events.
      .catch(() => undefined);
    this.queues.set(queueKey, tail);
    void tail.then(() => {
      if (this.queues.get(queueKey) === tail) this.queues.delete(queueKey);
    });
  }

  private async deliver(job: Job): Promise<void> {
    for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
      if (this.abort.signal.aborted) return;
      const result = await this.post(job);
      this.log.push({ event_id: job.event.id, type: job.event.type, attempt, ...result, at_ms: Date.now() });
      if (result.status !== null && result.status >= 200 && result.status < 300) return;
      if (attempt === this.retry.attempts) return;
      try {
        await sleep(this.retry.baseDelayMs * 2 ** (attempt - 1), undefined, { signal: this.abort.signal });
      } catch {
        return; // closed while waiting to retry
      }
    }
  }

  private post(job: Job): Promise<{ status: number | null; error?: string }> {
    // The timestamp is the wall clock, not the simulator clock: it proves freshness to a receiver on real time,
    // and tests advance the simulator clock by days for key expiry.
    const signature = signWebhook(job.secret, job.body, Math.floor(Date.now() / 1000));
    const url = new URL(job.url);
    const secure = url.protocol === 'https:';
    return new Promise((resolve) => {
      const req = (secure ? https : http).request(
        url,
        {
          method: 'POST',
          agent: secure ? this.agents.https : this.agents.http,
          signal: this.abort.signal,
          timeout: ATTEMPT_TIMEOUT_MS,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(job.body),
            'user-agent': 'payment-workflows-simulator',
            [SIGNATURE_HEADER]: signature,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? null }));
          res.on('error', (err) => resolve({ status: null, error: err.message }));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${ATTEMPT_TIMEOUT_MS} ms`)));
      req.on('error', (err) => resolve({ status: null, error: err.message }));
      req.end(job.body);
    });
  }
}

/** A new event id. */
export const newEventId = (): string => `evt_${randomBytes(12).toString('hex')}`;
