import { ConfigError, developmentDefaults, loadConfig } from '../../src/config';
import { defaultPaymentTimings } from '../../src/domain';

/** The variables a ConfigError names, in order. */
const failingVariables = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => i.variable);
    throw err;
  }
  throw new Error('expected a ConfigError');
};

describe('loadConfig', () => {
  it('has development defaults for everything', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      TEMPORAL_NAMESPACE: 'default',
      TASK_QUEUE: 'payments',
      PORT: 3000,
      SIMULATOR_PORT: 4010,
      SIMULATOR_URL: 'http://127.0.0.1:4010',
      PROVIDER_API_KEY: developmentDefaults.PROVIDER_API_KEY,
      PROVIDER_KEY_TTL_S: 86_400,
      PROVIDER_IDEMPOTENCY: true,
      LOG_LEVEL: 'info',
      API_TOKENS: [{ merchantId: 'dev_merchant', token: 'pw_dev_token_change_me' }],
      OPERATOR_TOKENS: [{ operatorId: 'dev_operator', token: 'pw_dev_operator_token_change_me' }],
      ORDER_SINGLE_FLIGHT: true,
      SPLIT_PAYMENT_MERCHANTS: [],
      providers: ['simulator'],
      defaultProvider: 'simulator',
      usingDevelopmentSecrets: true,
      timings: defaultPaymentTimings,
      retry: {},
      providerCapabilities: {
        idempotencyKeys: true,
        keyTtlSeconds: 86_400,
        lookupByKey: true,
        lookupByReference: true,
      },
    });
  });

  it('is pure: reads only what it is given', () => {
    expect(loadConfig({ PORT: '8080' }).PORT).toBe(8080);
    expect(loadConfig({}).PORT).toBe(3000);
  });

  it('parses every timing and retry override, and treats empty values as unset', () => {
    const c = loadConfig({
      SUBMIT_WAIT_MS: '200',
      RECONCILE_SCHEDULE_MS: '100, 200,400',
      SETTLE_WINDOW_MS: '300',
      AUTH_EXPIRY_MS: '5000',
      REFUND_WINDOW_MS: '6000',
      UNKNOWN_SWEEP_THRESHOLD_MS: '1000',
      CUSTOMER_ACTION_TIMEOUT_MS: '7000',
      RETRY_INITIAL_INTERVAL_MS: '50',
      RETRY_MAX_INTERVAL_MS: '500',
      RETRY_CREATE_BUDGET_MS: '20000',
      RETRY_LOOKUP_MAX_ATTEMPTS: '3',
      PROVIDER_TOTAL_TIMEOUT_MS: '',
    });
    expect(c.timings).toEqual({
      submitWaitMs: 200,
      reconcileScheduleMs: [100, 200, 400],
      settleWindowMs: 300,
      authorizationExpiryMs: 5000,
      refundWindowMs: 6000,
      unknownSweepThresholdMs: 1000,
      customerActionTimeoutMs: 7000,
    });
    // A payment waits for the customer one hour unless told otherwise.
    expect(loadConfig({}).timings.customerActionTimeoutMs).toBe(3_600_000);
    expect(c.retry.create).toEqual({ initialIntervalMs: 50, maximumIntervalMs: 500, budgetMs: 20_000 });
    expect(c.retry.lookup).toEqual({ initialIntervalMs: 50, maximumIntervalMs: 500, maximumAttempts: 3 });
    expect(c.PROVIDER_TOTAL_TIMEOUT_MS).toBe(10_000);
  });

  it('caps a provider Retry-After at PROVIDER_MAX_RETRY_AFTER_MS (default 60 s)', () => {
    expect(loadConfig({}).PROVIDER_MAX_RETRY_AFTER_MS).toBe(60_000);
    expect(loadConfig({ PROVIDER_MAX_RETRY_AFTER_MS: '15000' }).PROVIDER_MAX_RETRY_AFTER_MS).toBe(15_000);
  });

  it('parses API tokens and a provider without idempotency keys', () => {
    const c = loadConfig({
      API_TOKENS: 'shop_a:tok_aaaaaaaaaaaaaaaa, shop_b:tok_bbbbbbbbbbbbbbbb',
      PROVIDER_IDEMPOTENCY: 'false',
    });
    expect(c.API_TOKENS).toEqual([
      { merchantId: 'shop_a', token: 'tok_aaaaaaaaaaaaaaaa' },
      { merchantId: 'shop_b', token: 'tok_bbbbbbbbbbbbbbbb' },
    ]);
    expect(c.providerCapabilities).toEqual({
      idempotencyKeys: false,
      keyTtlSeconds: null,
      lookupByKey: false,
      lookupByReference: true,
      callLimits: { callTimeoutMs: 10_000, referencePages: 5 },
    });
  });

  it('parses operator tokens and the one-open-payment-per-order switches', () => {
    const c = loadConfig({
      OPERATOR_TOKENS: 'alice:tok_ops_aaaaaaaaaaaa, bob:tok_ops_bbbbbbbbbbbb,alice:tok_ops_cccccccccccc',
      ORDER_SINGLE_FLIGHT: 'false',
      SPLIT_PAYMENT_MERCHANTS: 'shop_a, shop_b,',
    });
    expect(c.OPERATOR_TOKENS).toEqual([
      { operatorId: 'alice', token: 'tok_ops_aaaaaaaaaaaa' },
      { operatorId: 'bob', token: 'tok_ops_bbbbbbbbbbbb' },
      { operatorId: 'alice', token: 'tok_ops_cccccccccccc' },
    ]);
    expect(c.ORDER_SINGLE_FLIGHT).toBe(false);
    expect(c.SPLIT_PAYMENT_MERCHANTS).toEqual(['shop_a', 'shop_b']);
  });

  it('lists every invalid variable at once, without echoing values', () => {
    let error: ConfigError | undefined;
    try {
      loadConfig({ PORT: 'http', LOG_LEVEL: 'loud', RETRY_VOID_BUDGET_MS: '-1', API_TOKENS: 'no-colon-sekrit-value' });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error?.issues.map((i) => i.variable)).toEqual(['PORT', 'LOG_LEVEL', 'RETRY_VOID_BUDGET_MS', 'API_TOKENS']);
    expect(error?.message).toMatch(/^Invalid configuration:\n {2}PORT: must be a whole number/);
    expect(error?.message).not.toContain('sekrit');
  });

  it.each<[Record<string, string>, string]>([
    [{ TEMPORAL_ADDRESS: 'localhost' }, 'TEMPORAL_ADDRESS'],
    [{ SIMULATOR_URL: 'ftp://x' }, 'SIMULATOR_URL'],
    [{ PROVIDER_IDEMPOTENCY: 'maybe' }, 'PROVIDER_IDEMPOTENCY'],
    [{ RECONCILE_SCHEDULE_MS: '30000,,x' }, 'RECONCILE_SCHEDULE_MS'],
    [{ UNKNOWN_SWEEP_THRESHOLD_MS: '1000' }, 'UNKNOWN_SWEEP_THRESHOLD_MS'],
    [{ API_TOKENS: 'a:tok_aaaaaaaaaaaaaaaa,b:tok_aaaaaaaaaaaaaaaa' }, 'API_TOKENS'],
    [{ API_TOKENS: 'bad:merchant:tok_aaaaaaaaaaaaaaaa' }, 'API_TOKENS'],
    [{ OPERATOR_TOKENS: 'ops_tok_aaaaaaaaaaaaaaaa' }, 'OPERATOR_TOKENS'],
    [{ OPERATOR_TOKENS: 'op:short' }, 'OPERATOR_TOKENS'],
    [{ OPERATOR_TOKENS: 'op:tok_aaaaaaaaaaaaaaaa,op2:tok_aaaaaaaaaaaaaaaa' }, 'OPERATOR_TOKENS'],
    [{ API_TOKENS: 'shop:tok_aaaaaaaaaaaaaaaa', OPERATOR_TOKENS: 'op:tok_aaaaaaaaaaaaaaaa' }, 'OPERATOR_TOKENS'],
    [{ ORDER_SINGLE_FLIGHT: 'sometimes' }, 'ORDER_SINGLE_FLIGHT'],
    [{ SPLIT_PAYMENT_MERCHANTS: 'shop:a' }, 'SPLIT_PAYMENT_MERCHANTS'],
    [{ PROVIDER_CONNECT_TIMEOUT_MS: '20000' }, 'PROVIDER_CONNECT_TIMEOUT_MS'],
    [{ RETRY_CREATE_ATTEMPT_TIMEOUT_MS: '200000' }, 'RETRY_CREATE_*'],
    // One attempt's calls, each up to the HTTP deadline, must fit its timeout: refund then read back (2 x 10 s)...
    [{ RETRY_REFUND_ATTEMPT_TIMEOUT_MS: '15000' }, 'RETRY_REFUND_ATTEMPT_TIMEOUT_MS'],
    // ... look-up pages before a resend plus the create, without keys (6 x 10 s) ...
    [{ PROVIDER_IDEMPOTENCY: 'false', RETRY_CREATE_ATTEMPT_TIMEOUT_MS: '30000' }, 'RETRY_CREATE_ATTEMPT_TIMEOUT_MS'],
    // ... and every one of them inside the budget (6 x 30 s > the 120 s create budget).
    [{ PROVIDER_IDEMPOTENCY: 'false', PROVIDER_TOTAL_TIMEOUT_MS: '30000' }, 'PROVIDER_TOTAL_TIMEOUT_MS'],
    [{ RETRY_LOOKUP_BUDGET_MS: '40000' }, 'RETRY_LOOKUP_BUDGET_MS'],
  ])('rejects %j at %s', (env, variable) => {
    expect(failingVariables(env)).toContain(variable);
  });

  it('requires real secrets in production', () => {
    expect(failingVariables({ NODE_ENV: 'production' })).toEqual([
      'PROVIDER_API_KEY',
      'API_TOKENS',
      'WEBHOOK_SECRET',
      'PAYLOAD_KEYS',
    ]);
    const c = loadConfig({
      NODE_ENV: 'production',
      PROVIDER_API_KEY: 'sk_live_xxxxxxxx',
      API_TOKENS: 'shop:tok_live_0123456789abcdef',
      WEBHOOK_SECRET: 'whsec_live_xxxxxxxx',
      PAYLOAD_KEYS: `live2:${Buffer.alloc(32, 2).toString('base64')},live1:${Buffer.alloc(32, 1).toString('base64')}`,
    });
    expect(c.payloadKeys.current.id).toBe('live2');
    expect([...c.payloadKeys.all.keys()]).toEqual(['live2', 'live1']);
    expect(c).not.toHaveProperty('PAYLOAD_KEYS'); // the raw string never travels with the config
    expect(c.usingDevelopmentSecrets).toBe(false);
    // No development operator token in production: without OPERATOR_TOKENS no one can resolve through the API.
    expect(c.OPERATOR_TOKENS).toEqual([]);
  });

  it('reads the workers’ workflow cache size, absent by default (the SDK’s own from the heap)', () => {
    expect(loadConfig({}).WORKER_MAX_CACHED_WORKFLOWS).toBeUndefined();
    expect(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '500' }).WORKER_MAX_CACHED_WORKFLOWS).toBe(500);
    expect(failingVariables({ WORKER_MAX_CACHED_WORKFLOWS: '-1' })).toEqual(['WORKER_MAX_CACHED_WORKFLOWS']);
    // No cache: the sdk-core this SDK runs can evict a payment mid-task with its local activities out (sdk-rust#1482).
    expect(failingVariables({ WORKER_MAX_CACHED_WORKFLOWS: '0' })).toEqual(['WORKER_MAX_CACHED_WORKFLOWS']);
    expect(loadConfig({ WORKER_MAX_CACHED_WORKFLOWS: '1' }).WORKER_MAX_CACHED_WORKFLOWS).toBe(1);
    expect(failingVariables({ WORKER_MAX_CACHED_WORKFLOWS: 'many' })).toEqual(['WORKER_MAX_CACHED_WORKFLOWS']);
  });

  it('reads the codec CORS origins and the metrics addresses', () => {
    const c = loadConfig({
      CODEC_CORS_ORIGINS: 'http://127.0.0.1:18233, https://ui.example.com',
      WORKER_METRICS_ADDRESS: '0.0.0.0:9100',
      SDK_METRICS_ADDRESS: 'off',
    });
    expect(c.CODEC_CORS_ORIGINS).toEqual(['http://127.0.0.1:18233', 'https://ui.example.com']);
    expect([c.WORKER_METRICS_ADDRESS, c.SDK_METRICS_ADDRESS]).toEqual(['0.0.0.0:9100', 'off']);
    expect(failingVariables({ CODEC_CORS_ORIGINS: 'http://ui.example.com/path' })).toEqual(['CODEC_CORS_ORIGINS']);
    expect(failingVariables({ SDK_METRICS_ADDRESS: '9464' })).toEqual(['SDK_METRICS_ADDRESS']);
  });

  it('reads decode-only codec tokens and the trusted UI origins; the latter are refused in production', () => {
    const c = loadConfig({
      CODEC_TOKENS: 'ui_proxy:tok_codec_aaaaaaaaaaaa',
      CODEC_TRUSTED_ORIGINS: 'http://127.0.0.1:8233',
    });
    expect(c.CODEC_TOKENS).toEqual([{ codecId: 'ui_proxy', token: 'tok_codec_aaaaaaaaaaaa' }]);
    expect(c.CODEC_TRUSTED_ORIGINS).toEqual(['http://127.0.0.1:8233']);
    expect(loadConfig({}).CODEC_TOKENS).toEqual([]);
    expect(loadConfig({}).CODEC_TRUSTED_ORIGINS).toEqual([]);
    expect(failingVariables({ CODEC_TOKENS: 'ui:short' })).toEqual(['CODEC_TOKENS']);
    expect(
      failingVariables({ OPERATOR_TOKENS: 'op:tok_aaaaaaaaaaaaaaaa', CODEC_TOKENS: 'ui:tok_aaaaaaaaaaaaaaaa' }),
    ).toEqual(['CODEC_TOKENS']);
    expect(
      failingVariables({
        NODE_ENV: 'production',
        PROVIDER_API_KEY: 'sk_live_xxxxxxxx',
        API_TOKENS: 'shop:tok_live_0123456789abcdef',
        WEBHOOK_SECRET: 'whsec_live_xxxxxxxx',
        PAYLOAD_KEYS: `live1:${Buffer.alloc(32, 1).toString('base64')}`,
        CODEC_TRUSTED_ORIGINS: 'https://ui.example.com',
      }),
    ).toEqual(['CODEC_TRUSTED_ORIGINS']);
  });

  it('refuses PAYLOAD_KEYS that do not parse, naming the variable', () => {
    expect(failingVariables({ PAYLOAD_KEYS: 'k1:c2hvcnQ=' })).toEqual(['PAYLOAD_KEYS']);
  });

  it('rejects a retry budget plus reconcile window that outlives the provider key, saying why', () => {
    let error: ConfigError | undefined;
    try {
      loadConfig({ PROVIDER_KEY_TTL_S: '3600' });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error?.issues.map((i) => i.variable)).toEqual(Array(4).fill('PROVIDER_KEY_TTL_S'));
    expect(error?.issues[0]?.message).toMatch(
      /^create: .*a resend after the provider forgot the key is a second charge/,
    );
    // Shorter reconcile schedule: fits in an hour.
    expect(() =>
      loadConfig({
        PROVIDER_KEY_TTL_S: '3600',
        RECONCILE_SCHEDULE_MS: '30000,120000,600000',
        UNKNOWN_SWEEP_THRESHOLD_MS: '3000000',
      }),
    ).not.toThrow();
    // Without keys there is no resend to protect.
    expect(() => loadConfig({ PROVIDER_KEY_TTL_S: '3600', PROVIDER_IDEMPOTENCY: 'false' })).not.toThrow();
  });
});
