import { randomUUID } from 'node:crypto';
import {
  type BreakerDecision,
  type BreakerOptions,
  type BreakerOutcome,
  type BreakerReport,
  type BreakerState,
  type InspectableBreaker,
  type ResolvedBreakerOptions,
  outcomeClass,
  refusal,
  reportProbeOutcome,
  reportProbeReleased,
  reportProbeTaken,
  resolveBreakerOptions,
} from './breaker';
import { FailureCounter } from './counting';

/** The old name of the breaker options, kept for callers. */
export type InMemoryBreakerOptions = BreakerOptions;

interface Entry {
  state: 'closed' | 'open' | 'half_open';
  openUntil: number;
  probe: string | undefined;
  probeUntil: number;
  readonly counter: FailureCounter;
  /** Provider-wide cool-down: no write before this (epoch ms). */
  notBefore: number;
}

/**
 * The in-process store: closed → open (counting strategy says so) → half-open after the open period, where exactly one
 * write is let through as the probe; its outcome closes or re-opens the breaker. Used when no Redis is configured and
 * as the fallback while Redis is unreachable.
 */
export class InMemoryCircuitBreaker implements InspectableBreaker {
  readonly #entries = new Map<string, Entry>();
  readonly #o: ResolvedBreakerOptions;

  constructor(options: BreakerOptions = {}) {
    this.#o = resolveBreakerOptions(options);
  }

  #entry(provider: string): Entry {
    let entry = this.#entries.get(provider);
    if (!entry) {
      entry = {
        state: 'closed',
        openUntil: 0,
        probe: undefined,
        probeUntil: 0,
        counter: new FailureCounter(this.#o.counting),
        notBefore: 0,
      };
      this.#entries.set(provider, entry);
    }
    return entry;
  }

  /** The provider's current state (closed when never seen). */
  state(provider: string): BreakerState {
    const e = this.#entries.get(provider);
    if (!e || e.state === 'closed') return { kind: 'closed', failures: e?.counter.consecutive ?? 0 };
    return e.state === 'open' ? { kind: 'open', until: e.openUntil } : { kind: 'half_open', probeUntil: e.probeUntil };
  }

  acquire(provider: string): BreakerDecision {
    const e = this.#entry(provider);
    const now = this.#o.now();
    if (now < e.notBefore) return refusal(this.#o, provider, now, e.notBefore - now, 'cool_down');
    if (e.state === 'closed') return { allowed: true };
    if (e.state === 'open' && now < e.openUntil) return refusal(this.#o, provider, now, e.openUntil - now, 'open');
    // A probe whose outcome never came back (a crashed worker) must not keep the breaker shut for good.
    if (e.state === 'half_open' && now < e.probeUntil) {
      return refusal(this.#o, provider, now, e.probeUntil - now, 'probe_in_flight');
    }
    const probe = randomUUID();
    const from = e.state;
    Object.assign(e, { state: 'half_open', probe, probeUntil: now + this.#o.probeTimeoutMs });
    reportProbeTaken(this.#o.notify, provider, from, now);
    return { allowed: true, probe };
  }

  record(provider: string, outcome: BreakerOutcome, report: BreakerReport = {}): void {
    const e = this.#entry(provider);
    const now = this.#o.now();
    if (report.coolDownMs !== undefined && report.coolDownMs > 0 && now + report.coolDownMs > e.notBefore) {
      e.notBefore = now + report.coolDownMs;
      this.#o.notify.onCoolDown({ provider, coolDownMs: report.coolDownMs, untilMs: e.notBefore, atMs: now });
    }
    const cls = outcomeClass(outcome);
    if (cls === 'ignored') return;
    if (e.state === 'half_open') {
      // Only the probe decides; a late call that started before the breaker opened, or a read, proves nothing.
      if (report.probe === undefined || report.probe !== e.probe) return;
      if (report.kind === 'read') {
        // The probe's write never reached the provider: nothing was tested, the next write is the probe.
        Object.assign(e, { probe: undefined, probeUntil: 0 });
        reportProbeReleased(this.#o.notify, provider, now);
        return;
      }
      e.counter.reset();
      if (cls === 'healthy') Object.assign(e, { state: 'closed', probe: undefined, probeUntil: 0 });
      else Object.assign(e, { state: 'open', openUntil: now + this.#o.openMs, probe: undefined, probeUntil: 0 });
      reportProbeOutcome(this.#o.notify, provider, cls === 'healthy', now);
      return;
    }
    // Already open: a call that started before it opened changes nothing.
    if (e.state === 'open') return;
    // A read's success says nothing about whether writes go through.
    if (cls === 'healthy' && report.kind === 'read') return;
    if (e.counter.record(cls === 'healthy', now)) {
      e.counter.reset();
      Object.assign(e, { state: 'open', openUntil: now + this.#o.openMs });
      this.#o.notify.onTransition({ provider, from: 'closed', to: 'open', atMs: now });
    }
  }
}
