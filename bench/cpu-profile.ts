/**
 * `npx tsx bench/cpu-profile.ts <dir with *.cpuprofile> [results.json] [scenario id]`: where a payment's Node CPU goes.
 *
 * Run the bench under `node --cpu-prof --cpu-prof-dir=<dir>` (every thread writes its own profile: the main thread
 * runs API, client, activities, simulator and load generator; the workflow thread runs the workflow bundle), then
 * point this at the directory. With a results file (and a scenario id, default `api-bulkhead`) only the samples of
 * that scenario's measured batch count (its `measuredWindowUs`, on the same monotonic clock), and the totals are
 * divided by its payments: milliseconds per payment by thread, by package / source folder, and the top functions.
 * Workflow code runs from the webpack bundle (one script); its samples are mapped back to the bundled module by line,
 * rebuilding the bundles of `src/workflows` and `bench/peers/bare-workflow.ts` (deterministic for the same sources).
 *
 * The profiler samples wall time per thread: on a busy machine a runnable thread that waits for a core is counted
 * too, so read the shares, not the absolute milliseconds, unless `others busy` was near 0.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** The package or source folder of a module path. */
function groupOf(modulePath: string): string | undefined {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(modulePath);
  if (pkg?.[1]) return pkg[1];
  const src = /(?:^|\/)(src\/[^/]+|bench|scripts)\//.exec(modulePath);
  return src?.[1]?.replace(/\.ts$/, '');
}

/** A rebuilt workflow bundle: its lines and, per line (1-based), the bundled module it belongs to. */
interface Bundle {
  readonly lines: readonly string[];
  /** `[first line, module path]`, sorted by line, from webpack's `/***\/ "path"` markers. */
  readonly modules: readonly (readonly [number, string])[];
}

function parseBundle(code: string): Bundle {
  const lines = code.split('\n');
  const modules: [number, string][] = [];
  lines.forEach((line, i) => {
    const m = /^\/\*\*\*\/ "([^"]+)"$/.exec(line);
    if (m?.[1]) modules.push([i + 1, m[1]]);
  });
  return { lines, modules };
}

function moduleAt(bundle: Bundle, line: number): string {
  let lo = 0;
  let hi = bundle.modules.length - 1;
  let found = '(bundle runtime)';
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const entry = bundle.modules[mid] as readonly [number, string];
    if (entry[0] <= line) {
      found = entry[1];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

const isBundleUrl = (url: string): boolean => /workflow-bundle-[0-9a-f]+\.js$/.test(url);

/** Which rebuilt bundle a profile's bundle URL is: the one whose lines hold the most of its frames' function names. */
function matchBundles(profiles: readonly CpuProfile[], bundles: readonly Bundle[]): Map<string, Bundle> {
  const framesByUrl = new Map<string, CallFrame[]>();
  for (const p of profiles) {
    for (const n of p.nodes) {
      if (!isBundleUrl(n.callFrame.url) || !n.callFrame.functionName) continue;
      const list = framesByUrl.get(n.callFrame.url) ?? [];
      list.push(n.callFrame);
      framesByUrl.set(n.callFrame.url, list);
    }
  }
  const out = new Map<string, Bundle>();
  for (const [url, frames] of framesByUrl) {
    let best: { bundle: Bundle; score: number } | undefined;
    for (const bundle of bundles) {
      const score = frames.filter((f) => bundle.lines[f.lineNumber]?.includes(f.functionName)).length;
      if (!best || score > best.score) best = { bundle, score };
    }
    if (best && best.score > frames.length / 2) out.set(url, best.bundle);
  }
  return out;
}

/**
 * A package name, a source folder (`src/api`), `bundle:<package or folder>` for workflow code, or what V8 calls the
 * frame (`(garbage collector)`, `(program)`).
 */
function categoryOf(frame: CallFrame, bundles: ReadonlyMap<string, Bundle>): string {
  const { url } = frame;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  if (isBundleUrl(url)) {
    const bundle = bundles.get(url);
    if (!bundle) return 'bundle (sources changed since the run?)';
    const mod = moduleAt(bundle, frame.lineNumber + 1);
    return `bundle:${groupOf(mod) ?? mod}`;
  }
  const group = groupOf(url);
  if (group) return group;
  if (url.startsWith('node:')) return 'node:internal';
  return url
    .replace(/^file:\/\//, '')
    .split('/')
    .slice(-2)
    .join('/');
}

interface Tally {
  readonly byCategory: Map<string, number>;
  readonly byFunction: Map<string, number>;
  total: number;
}

function tallyProfile(
  profile: CpuProfile,
  window: { startUs: number; endUs: number } | undefined,
  bundles: ReadonlyMap<string, Bundle>,
  into: Tally,
) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    t += delta;
    if (window && (t < window.startUs || t > window.endUs)) continue;
    const node = byId.get(profile.samples[i] as number);
    if (!node) continue;
    // A sample stands for the time since the previous one.
    const us = Math.max(0, delta);
    const category = categoryOf(node.callFrame, bundles);
    into.byCategory.set(category, (into.byCategory.get(category) ?? 0) + us);
    const fn = `${node.callFrame.functionName || '(anonymous)'} ${category}:${node.callFrame.lineNumber + 1}`;
    into.byFunction.set(fn, (into.byFunction.get(fn) ?? 0) + us);
    into.total += us;
  }
}

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

async function main(): Promise<void> {
  const [dir, resultsFile, scenarioId = 'api-bulkhead'] = process.argv.slice(2);
  if (!dir) throw new Error('usage: tsx bench/cpu-profile.ts <profile dir> [results.json] [scenario id]');
  let window: { startUs: number; endUs: number } | undefined;
  let payments = 1;
  if (resultsFile) {
    const results = JSON.parse(readFileSync(resultsFile, 'utf8')) as {
      scenarios: { id: string; payments: number; measuredWindowUs?: { startUs: number; endUs: number } }[];
    };
    const scenario = results.scenarios.find((s) => s.id === scenarioId);
    if (!scenario?.measuredWindowUs) throw new Error(`no measured window for ${scenarioId} in ${resultsFile}`);
    window = scenario.measuredWindowUs;
    payments = scenario.payments;
  }
  const rebuilt: Bundle[] = [];
  for (const workflowsPath of [require.resolve('../src/workflows'), require.resolve('./peers/bare-workflow')]) {
    rebuilt.push(parseBundle((await bundleWorkflowCode({ workflowsPath, logger: quiet })).code));
  }
  const unit = resultsFile ? 'ms/payment' : 'ms';
  const fmt = (us: number) => (us / 1000 / payments).toFixed(2).padStart(8);
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  const profiles = files.map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as CpuProfile);
  const bundles = matchBundles(profiles, rebuilt);
  const overall: Tally = { byCategory: new Map(), byFunction: new Map(), total: 0 };
  for (const [i, file] of files.entries()) {
    const profile = profiles[i] as CpuProfile;
    const own: Tally = { byCategory: new Map(), byFunction: new Map(), total: 0 };
    tallyProfile(profile, window, bundles, own);
    tallyProfile(profile, window, bundles, overall);
    const idle = own.byCategory.get('(idle)') ?? 0;
    process.stdout.write(`${file}: ${fmt(own.total - idle)} ${unit} busy\n`);
  }
  const busy = overall.total - (overall.byCategory.get('(idle)') ?? 0);
  process.stdout.write(`\nall threads: ${fmt(busy)} ${unit} busy\n\nby package / folder (${unit})\n`);
  for (const [k, us] of [...overall.byCategory].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
    if (k === '(idle)') continue;
    process.stdout.write(`${fmt(us)}  ${((us / busy) * 100).toFixed(1).padStart(5)}%  ${k}\n`);
  }
  process.stdout.write(`\ntop functions, self time (${unit})\n`);
  for (const [k, us] of [...overall.byFunction].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
    if (k.startsWith('(idle)')) continue;
    process.stdout.write(`${fmt(us)}  ${k}\n`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
