import { connectDevServer, createTimeSkippingEnv } from '../helpers/servers';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';

describe('Temporal servers', () => {
  it('time-skipping server skips a day in far less than a day', async () => {
    const env = await createTimeSkippingEnv();
    try {
      expect(env.supportsTimeSkipping).toBe(true);
      const before = await env.currentTimeMs();
      await env.sleep('1 day');
      const after = await env.currentTimeMs();
      expect(after - before).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    } finally {
      await env.teardown();
    }
  });

  it('dev server has the payment search attributes registered', async () => {
    const env = await connectDevServer();
    try {
      const res = await env.connection.operatorService.listSearchAttributes({ namespace: 'default' });
      for (const key of paymentSearchAttributes) expect(res.customAttributes?.[key.name]).toBeDefined();
    } finally {
      await env.teardown();
    }
  });
});
