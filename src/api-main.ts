/**
 * The API process: listens on HOST:PORT (default 127.0.0.1:3000), drains on SIGINT/SIGTERM (in-flight requests finish, new ones get 503),
 * for at most max(10 s, SUBMIT_WAIT_MS + 5 s), then exits 1; exits 1 on a start-up error. Wired by src/stack.ts, as the worker process, the tests and the bench are.
 */
import pino from 'pino';
import { loadConfig } from './config';
import { drainOnSignals } from './exit-deadline';
import { startConfiguredStack } from './stack';

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = pino({
    level: config.LOG_LEVEL,
    base: { component: 'api' },
    // Belt and braces: nothing logs these, but a future `log.info({ req })` must not leak them.
    redact: ['req.headers.authorization', '*.paymentMethod', '*.payment_method'],
  });
  if (config.usingDevelopmentSecrets) logger.warn('using development secrets: never in production');
  const stack = await startConfiguredStack(config, logger, { api: true });

  // In-flight requests get this long to finish (the longest, a charge, answers by SUBMIT_WAIT_MS plus its margin); a
  // request that never completes (a client stalled mid-body) would hold the drain for Node's request timeout, 5
  // minutes. Under a supervisor its stop timeout SIGKILLs later anyway; after the supervisor died nobody would, and a
  // blocked event loop would hold off this limit too: exit-deadline.ts keeps it from a thread of its own.
  const drainLimitMs = Math.max(10_000, config.timings.submitWaitMs + 5_000);
  drainOnSignals({ what: 'api', logger, drainLimitMs, close: () => stack.close() });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
