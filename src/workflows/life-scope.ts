import { CancellationScope, setHandler } from '@temporalio/workflow';

/**
 * The scope a payment lives in, shielded from a cancellation request. Such a request (the web UI's "Request
 * Cancellation", `temporal workflow cancel`) cancels the workflow's root scope: every timer, activity, child and
 * condition in it, so the run used to end CANCELED wherever it stood, with an authorization held at the provider, a
 * create in flight or a reconcile cut off. Here it reaches the payment as a request instead (`shield.cancelRequested`
 * rejects), which the payment decides like any other (see cancellation-request.ts).
 *
 * Replay of histories recorded before: that a cancellation stops at a non-cancellable scope is the SDK flag
 * `NonCancellableScopesAreShieldedFromPropagation`, recorded in the workflow task where it first applies (here: the
 * task of the request). A task recorded without it, as every task of a run that never shielded anything, passes the
 * request on to `life` and everything in it, as the root scope did then: the run ends CANCELED as recorded
 * (test/histories/cancel-request-before-handling.*). No patch marker is needed on top of the SDK's own.
 */
export interface PaymentScopes {
  /** Sees the cancellation request without passing it on. */
  readonly shield: CancellationScope;
  /** Everything the payment starts: its main line and its handlers. */
  readonly life: CancellationScope;
}

/** The two scopes of a payment; create them first thing in the workflow. */
export function paymentScopes(): PaymentScopes {
  const shield = new CancellationScope({ cancellable: false });
  const life = new CancellationScope({ cancellable: true, parent: shield });
  return { shield, life };
}

/**
 * Calls `fn` in `scope` (what it starts is cancelled with the scope) and answers exactly what `fn` answers: no promise
 * wraps it, so a handler's answer reaches the SDK at the same microtask as before (the order of the commands of one
 * workflow task depends on it).
 */
export function callIn<T>(scope: CancellationScope, fn: () => T): T {
  let outcome: { value: T } | { error: unknown } | undefined;
  // `run` calls its function synchronously in the scope; the async wrapper's own promise never rejects.
  void scope.run(async () => {
    try {
      outcome = { value: fn() };
    } catch (error) {
      outcome = { error };
    }
  });
  if (outcome === undefined) throw new TypeError('CancellationScope.run did not call its function synchronously');
  if ('error' in outcome) throw outcome.error;
  return outcome.value;
}

/**
 * `setHandler` whose signal and update handlers run in `scope` (a handler starts in no scope of its own: in the root
 * one). Queries and update validators start nothing and stay as they are.
 */
export function setHandlerIn(scope: CancellationScope): typeof setHandler {
  const set = (def: { readonly type: string }, handler: unknown, options?: unknown): void => {
    const inScope =
      def.type !== 'query' && typeof handler === 'function'
        ? (...args: unknown[]) => callIn(scope, () => (handler as (...a: unknown[]) => unknown)(...args))
        : handler;
    (setHandler as (d: unknown, h: unknown, o?: unknown) => void)(def, inScope, options);
  };
  return set as typeof setHandler;
}
