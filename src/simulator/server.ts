import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SimContext, SimLogEntry } from './context';
import { createControls, handleControlRequest, type SimulatorControls } from './control';
import { FaultInjector } from './faults';
import { errorReply, send } from './http';
import { IdempotencyTable } from './idempotency';
import { restoreState, StateJournal } from './persistence';
import { handleProviderRequest, matchProviderRoute } from './provider';
import { SimStore } from './store';
import { WebhookDispatcher, type WebhookRetry } from './webhooks';

export type { SimLogEntry } from './context';
export type { SimulatorControls } from './control';
export type { FaultRuleView } from './faults';
export type { MerchantSettings, MerchantSettingsInput, FaultsBodyInput } from './schemas';
export type { Ledger, LedgerEffect, LedgerRequest, Payment, Refund } from './state';
export type { WebhookDelivery, WebhookEvent, WebhookEventType } from './webhooks';

/** How to start a simulator. */
export interface SimulatorOptions {
  /** 0 picks a free port; default 4010. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** File that keeps state across restarts (a JSON snapshot, then one JSON line per save); absent: memory only. */
  statePath?: string;
  /** Webhook delivery bounds; default 5 attempts from 500 ms. */
  webhookRetry?: WebhookRetry;
  /** Receives one entry per request and every error; default: silent. */
  logger?: (entry: SimLogEntry) => void;
}

/** A started simulator: its address, its controls (see {@link SimulatorControls}) and `close`. */
export interface RunningSimulator extends SimulatorControls {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:4010`. */
  url: string;
  port: number;
  /** Stops accepting, ends open connections, cancels latency and webhook retries, saves state. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_RETRY: WebhookRetry = { attempts: 5, baseDelayMs: 500 };

/** Starts a provider simulator on a real HTTP port. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<RunningSimulator> {
  const log = opts.logger ?? (() => undefined);
  const store = new SimStore();
  let journal: StateJournal | undefined;
  if (opts.statePath !== undefined) {
    await restoreState(store, opts.statePath);
    journal = new StateJournal(
      opts.statePath,
      { snapshot: () => store.toState(), takeChanges: () => store.takeChanges() },
      (err) => log({ level: 'error', msg: 'state save failed', error: String(err) }),
    );
    await journal.open();
  }
  const closing = new AbortController();
  const webhooks = new WebhookDispatcher(opts.webhookRetry ?? DEFAULT_RETRY);
  const ctx: SimContext = {
    store,
    idempotency: new IdempotencyTable(store),
    faults: new FaultInjector(),
    webhooks,
    persist: () => journal?.save() ?? Promise.resolve(),
    baseUrl: '',
    signal: closing.signal,
    log,
  };
  const controls = createControls(ctx);
  const active = new Set<Promise<void>>();

  const server = http.createServer((req, res) => {
    const started = performance.now();
    const done: Promise<void> = dispatch(ctx, controls, req, res)
      .catch((err: unknown) => fail(ctx, req, res, err))
      .finally(() => {
        active.delete(done);
        log({
          level: 'info',
          msg: 'request',
          method: req.method,
          path: loggablePath(req.url),
          status: res.headersSent ? res.statusCode : null,
          ms: Math.round(performance.now() - started),
        });
      });
    active.add(done);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 4010, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  ctx.baseUrl = `http://${host}:${address.port}`;

  let closed: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    closing.abort();
    // Keep-alive clients (fetch, undici) would otherwise hold the server open.
    server.closeAllConnections();
    await Promise.allSettled(active);
    await stopped;
    await webhooks.close();
    await ctx.persist();
    await journal?.close();
  };

  return {
    ...controls,
    url: ctx.baseUrl,
    port: address.port,
    close: () => (closed ??= close()),
  };
}

async function dispatch(
  ctx: SimContext,
  controls: SimulatorControls,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sim');
  const path = url.pathname;
  if (path.startsWith('/_sim/')) return handleControlRequest(controls, req, res, url);
  const route = matchProviderRoute(req.method ?? 'GET', path);
  if (route === 'method_not_allowed') {
    return send(res, errorReply(405, 'invalid_request_error', 'method_not_allowed', 'method not allowed'));
  }
  if (!route) return send(res, errorReply(404, 'invalid_request_error', 'route_not_found', `no route ${path}`));
  return handleProviderRequest(ctx, req, res, route, url);
}

/** Last resort: a closing simulator drops the connection; anything else is a 500 and a log line. */
function fail(ctx: SimContext, req: IncomingMessage, res: ServerResponse, err: unknown): void {
  if (ctx.signal.aborted) {
    req.socket.destroy();
    return;
  }
  ctx.log({ level: 'error', msg: 'request failed', method: req.method, error: String(err) });
  if (res.headersSent) req.socket.destroy();
  else send(res, errorReply(500, 'api_error', 'internal_error', 'simulator error'));
}

/** The request path for logs: no query (keys, references) and no api key from `/_sim/merchants/:apiKey`. */
function loggablePath(rawUrl: string | undefined): string {
  const path = new URL(rawUrl ?? '/', 'http://sim').pathname;
  return path.startsWith('/_sim/merchants/') ? '/_sim/merchants/:apiKey' : path;
}
