/** The growth bench's report (issue 21 §3): one line per step and the ±20 % verdict from the first step to the last. */
import { type GrowthStep, flat, growthReport } from '../../bench/growth';

const step = (open: number, over: Partial<GrowthStep> = {}): GrowthStep => ({
  open,
  latencyP50Ms: 40,
  latencyP99Ms: 120,
  cpuMsPerPayment: 30,
  simulatorCpuMsPerPayment: 5,
  pgBytesPerOpen: 20_480,
  pgMarginalBytesPerOpen: 10_240,
  pgBytes: { temporal: 10 * 1024 ** 2, visibility: 2 * 1024 ** 2, payments: 1024 ** 2 },
  workersRssMiB: 600,
  ...over,
});

describe('the growth report', () => {
  it('says which measure stayed within +-20 % from the first step to the last', () => {
    const lines = growthReport([step(1_000), step(10_000, { latencyP99Ms: 150 }), step(50_000, { latencyP99Ms: 160 })]);
    expect(lines).toHaveLength(4);
    expect(lines[0]).toBe(
      'growth: 1000 open: new payment p50 40 ms, p99 120 ms; CPU 30.0 ms per payment (the simulator 5.0 more); ' +
        'PostgreSQL 20.0 KiB per open ' +
        'payment, 10.0 KiB per payment added (temporal 10.0 MiB, visibility 2.0 MiB, payments 1.0 MiB); workers 600 MiB',
    );
    expect(lines[3]).toBe(
      'growth 1000 -> 50000 open (within +-20 %?): latency p50 +0 % yes, latency p99 +33 % NO, CPU per payment +0 % ' +
        'yes, PostgreSQL bytes per payment added +0 % yes, worker memory +0 % yes',
    );
  });

  it('takes a fall as much as a rise', () => {
    expect(flat(100, 120)).toBe(true);
    expect(flat(100, 79)).toBe(false);
    expect(flat(100, 121)).toBe(false);
    expect(flat(0, 0)).toBe(true);
  });
});
