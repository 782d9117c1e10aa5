/** What the configuration found wrong: one issue per variable, all of them at once. */
import type { z } from 'zod';

/** One problem with one variable. Values are never echoed: some variables are secrets. */
export interface ConfigIssue {
  readonly variable: string;
  readonly message: string;
}

/** Thrown by {@link loadConfig}: every problem at once, one line per variable. */
export class ConfigError extends Error {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    super(`Invalid configuration:\n${issues.map((i) => `  ${i.variable}: ${i.message}`).join('\n')}`);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

export const issuesOf = (error: z.ZodError, fallbackVariable?: string): ConfigIssue[] =>
  error.issues.map((issue) => ({
    variable: typeof issue.path[0] === 'string' ? issue.path[0] : (fallbackVariable ?? '(config)'),
    message: issue.message,
  }));

/** The variables that are set: an empty value (`FOO=` in a compose file) means "not set". */
export type RawEnv = Readonly<Record<string, string>>;
