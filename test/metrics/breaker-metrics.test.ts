/**
 * The breaker's observer counts into Prometheus series: a trip, the refused writes while open, the probe and the
 * close are each visible in the worker's metrics text. A real in-process breaker on an injected clock.
 */
import { Registry } from 'prom-client';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { breakerMetricsObserver } from '../../src/metrics/worker-metrics';

it('counts transitions, refusals and probes of a real breaker', async () => {
  const registry = new Registry();
  let nowMs = 1_000_000;
  const breaker = new InMemoryCircuitBreaker({
    failureThreshold: 2,
    cooldownMs: 5_000,
    jitterMs: 0,
    now: () => nowMs,
    observer: breakerMetricsObserver(registry),
  });
  await breaker.record('simulator', 'ProviderUnavailable');
  await breaker.record('simulator', 'ProviderUnavailable'); // trips
  expect((await breaker.acquire('simulator')).allowed).toBe(false);
  nowMs += 5_001;
  const probe = await breaker.acquire('simulator');
  expect(probe.allowed).toBe(true);
  await breaker.record(
    'simulator',
    'success',
    probe.allowed && probe.probe ? { kind: 'write', probe: probe.probe } : {},
  );

  const text = await registry.metrics();
  expect(text).toContain('payments_breaker_transitions_total{provider="simulator",to="open"} 1');
  expect(text).toContain('payments_breaker_refusals_total{provider="simulator",reason="open"} 1');
  expect(text).toContain('payments_breaker_probes_total{provider="simulator",result="sent"} 1');
  expect(text).toContain('payments_breaker_probes_total{provider="simulator",result="succeeded"} 1');
  expect(text).toContain('payments_breaker_transitions_total{provider="simulator",to="closed"} 1');
});
