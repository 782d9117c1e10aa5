/**
 * End to end: the README's first command. `npm start` on free ports with a throw-away SQLite file, a real payment
 * through the real API, the payment found in the Temporal web UI by headless Chromium, then Ctrl-C (SIGINT to the
 * process group, as a terminal sends it) and nothing left behind.
 *
 * Needs Chromium at /usr/bin/chromium (Debian package `chromium`); playwright-core drives it and never downloads a
 * browser. Set E2E_ARTIFACTS_DIR to keep the screenshots and the stack's output; otherwise they go to a temp dir
 * that is removed afterwards.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { chargeWorkflowId } from '../../src/domain/ids';
import { developmentDefaults } from '../../src/config';
import { HOST, Stack, freePorts, portIsFree } from '../helpers/npm-start';

const CHROMIUM = '/usr/bin/chromium';

const START_TIMEOUT_MS = 120_000;
/** Acceptance: the web UI answers within 60 s of `npm start` (binaries already provisioned by `npm test`). */
const UI_READY_LIMIT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const BROWSER_TIMEOUT_MS = 60_000;

const [merchantId, token] = developmentDefaults.API_TOKENS.split(':') as [string, string];

/** Waits until the page shows `text`, reloading between bounded attempts (visibility and the UI's polling lag). */
async function waitForText(page: Page, text: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await page.getByText(text).first().waitFor({ state: 'visible', timeout: 5_000 });
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`"${text}" not shown at ${page.url()} after ${attempt} attempts: ${String(err)}`);
      }
      await page.reload({ waitUntil: 'domcontentloaded', timeout: 15_000 }).catch(() => undefined);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------

const describeWithChromium = existsSync(CHROMIUM) ? describe : describe.skip;
const title = existsSync(CHROMIUM)
  ? 'npm start (end to end)'
  : `npm start (end to end) SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium)`;

describeWithChromium(title, () => {
  let tmp: string;
  let artifacts: string;
  let stack: Stack | undefined;
  let browser: BrowserContext | undefined;
  let passed = false;

  beforeAll(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-e2e-npm-start-'));
    artifacts = process.env.E2E_ARTIFACTS_DIR ?? path.join(tmp, 'artifacts');
    mkdirSync(artifacts, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close().catch(() => undefined);
    if (stack) {
      if (!passed) console.error(`[e2e] npm start output (last lines):\n${stack.tail(80)}`);
      writeFileSync(path.join(artifacts, 'npm-start.log'), stack.output);
      await stack.kill();
    }
    rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  it('serves the stack, charges through the API, shows the payment in the web UI, and stops on Ctrl-C', async () => {
    const testStarted = Date.now();
    const [temporalPort, uiPort, simulatorPort, apiPort] = (await freePorts(4)) as [number, number, number, number];
    const ports = { temporalPort, uiPort, simulatorPort, apiPort };
    const ui = `http://${HOST}:${uiPort}`;
    const api = `http://${HOST}:${apiPort}`;

    stack = new Stack({
      ...process.env,
      TEMPORAL_PORT: String(temporalPort),
      TEMPORAL_UI_PORT: String(uiPort),
      SIMULATOR_PORT: String(simulatorPort),
      PORT: String(apiPort),
      TEMPORAL_DB_FILE: path.join(tmp, 'dev-server.sqlite'),
      TASK_QUEUE: `e2e-${randomUUID()}`,
      // The worker's "worker running" line is the readiness signal below.
      LOG_LEVEL: 'info',
      // Room for a workflow task on two busy cores (other test files run beside this one): the API answers 200
      // once the provider call settled, well within this.
      SUBMIT_WAIT_MS: '20000',
    });
    const s = stack;

    // 1. The web UI answers, then the whole stack reports ready.
    let uiReadyMs: number | undefined;
    await s.until(
      'web UI HTTP 200',
      async () => {
        try {
          const res = await fetch(ui, { signal: AbortSignal.timeout(2_000) });
          if (res.ok) uiReadyMs = Date.now() - s.spawnedAt;
          return res.ok;
        } catch {
          return false;
        }
      },
      START_TIMEOUT_MS,
    );
    console.log(`[e2e] web UI answered 200 after ${((uiReadyMs ?? 0) / 1000).toFixed(1)} s`);
    expect(uiReadyMs).toBeLessThan(UI_READY_LIMIT_MS);

    await s.until(
      '"[start] Press Ctrl-C to stop."',
      () => s.output.includes('Press Ctrl-C to stop.'),
      START_TIMEOUT_MS,
    );
    await s.until('"worker running"', () => s.output.includes('"msg":"worker running"'), START_TIMEOUT_MS);
    console.log(`[e2e] stack ready (API, worker) after ${s.elapsedS()} s`);
    expect(s.output).toContain(`Temporal web UI:       ${ui}`);
    expect(s.output).toContain(`Payments API:          ${api}`);
    s.snapshot();

    // 2. A payment through the real API, with the development token `npm start` prints.
    const key = `e2e-${randomUUID()}`;
    const workflowId = chargeWorkflowId(merchantId, key);
    const res = await fetch(`${api}/v1/payments`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'idempotency-key': key,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        orderId: `order-${key}`,
        amount: { value: 1000, currency: 'EUR' },
        paymentMethod: 'pm_card_visa',
      }),
      signal: AbortSignal.timeout(60_000),
    });
    const view = (await res.json()) as { key?: string; merchantId?: string; status?: string };
    expect({ status: res.status, body: view }).toMatchObject({
      status: 200,
      body: { key, merchantId, status: 'succeeded' },
    });
    console.log(`[e2e] payment ${key} succeeded after ${s.elapsedS()} s`);

    // 3. The payment in the web UI: the list filtered by the PaymentStatus search attribute, then its detail page.
    browser = await chromium.launchPersistentContext(path.join(tmp, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless=new',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1440, height: 900 },
    });
    // Loopback only: whatever the UI would fetch from elsewhere (a news feed, fonts) is refused here.
    await browser.route(
      (url) => !['127.0.0.1', 'localhost'].includes(url.hostname) && url.protocol !== 'data:',
      (route) => route.abort(),
    );
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(30_000);

    const query = encodeURIComponent('PaymentStatus="succeeded"');
    const listUrl = `${ui}/namespaces/default/workflows?query=${query}`;
    const browserStarted = Date.now();
    await page.goto(listUrl, { waitUntil: 'domcontentloaded' });
    await waitForText(page, workflowId, BROWSER_TIMEOUT_MS);
    await page.screenshot({ path: path.join(artifacts, 'workflows-succeeded.png'), fullPage: true });
    console.log(`[e2e] workflow listed in the UI after ${((Date.now() - browserStarted) / 1000).toFixed(1)} s`);

    const detailUrl = `${ui}/namespaces/default/workflows/${encodeURIComponent(workflowId)}`;
    await page.goto(detailUrl, { waitUntil: 'domcontentloaded' });
    await waitForText(page, 'chargeWorkflow', BROWSER_TIMEOUT_MS);
    await expect(page.getByText(workflowId).first().isVisible()).resolves.toBe(true);
    await page.screenshot({ path: path.join(artifacts, 'workflow-detail.png'), fullPage: true });
    await browser.close();
    browser = undefined;

    // 4. Ctrl-C: everything stops within bounds and leaves no process and no port behind.
    s.snapshot();
    const stopping = Date.now();
    s.interrupt();
    await s.until('exit', () => s.exit !== undefined, STOP_TIMEOUT_MS, { intervalMs: 100, afterExit: true });
    await s.until('end of output', () => s.isClosed, 5_000, { intervalMs: 100, afterExit: true });
    const stopS = (Date.now() - stopping) / 1000;
    console.log(`[e2e] npm start stopped ${stopS.toFixed(1)} s after Ctrl-C (${JSON.stringify(s.exit)})`);
    expect(s.output).toContain('[start] Stopped.');
    expect(s.output).not.toContain('exited unexpectedly');
    // start.ts exits 0 after "Stopped."; npm reports that as 0 where `sh` is bash, and by SIGINT where `sh` is dash
    // (Debian), which re-raises a Ctrl-C it saw after its command ends. Both are a clean Ctrl-C.
    expect([JSON.stringify({ code: 0, signal: null }), JSON.stringify({ code: null, signal: 'SIGINT' })]).toContain(
      JSON.stringify(s.exit),
    );
    await s
      .until('every stack process gone', () => s.leftovers().length === 0, 10_000, {
        intervalMs: 100,
        afterExit: true,
      })
      .catch((err: Error) => {
        throw new Error(`${err.message}\nstill running: ${s.describeLeftovers()}`);
      });
    for (const [name, port] of Object.entries(ports)) {
      await s.until(`${name} ${port} free again`, () => portIsFree(port), 10_000, { afterExit: true });
    }
    console.log(`[e2e] total ${((Date.now() - testStarted) / 1000).toFixed(1)} s`);
    passed = true;
  }, 180_000);
});
