/**
 * How workflows read an activity's failure: an activity that timed out before any worker started it sent nothing
 * (`neverStarted`), one that started and was cut off may have; the count of requests that may have left (`sendsOf`).
 */
import { ActivityFailure, ApplicationFailure, RetryState, TimeoutFailure } from '@temporalio/common';
import { neverStarted, sendsOf } from '../../src/workflows/failures';

const activity = (cause: Error) =>
  new ActivityFailure('activity failed', 'createPayment', '2', RetryState.TIMEOUT, 'worker', cause);

describe('neverStarted', () => {
  it('a schedule-to-start timeout with no attempt under it: the activity never reached a worker', () => {
    const err = activity(new TimeoutFailure('activity timeout', undefined, 'SCHEDULE_TO_START'));
    expect(neverStarted(err)).toBe(true);
    // What the reconcile counted before (reconcile-unstarted-resubmission): a request that may have left.
    expect(sendsOf(err)).toBe(1);
  });

  it('a timeout over an attempt that ran, or that cut an attempt off, may have sent: not "never started"', () => {
    const afterAttempt = new TimeoutFailure('activity timeout', undefined, 'SCHEDULE_TO_START');
    // As the SDK decodes it: the last attempt's failure as the timeout's cause.
    Object.defineProperty(afterAttempt, 'cause', {
      value: ApplicationFailure.create({ type: 'OutcomeUnknown', message: 'reset after send' }),
    });
    expect(neverStarted(activity(afterAttempt))).toBe(false);
    for (const type of ['START_TO_CLOSE', 'SCHEDULE_TO_CLOSE', 'HEARTBEAT'] as const) {
      expect(neverStarted(activity(new TimeoutFailure('activity timeout', undefined, type)))).toBe(false);
    }
    expect(neverStarted(activity(ApplicationFailure.create({ type: 'CircuitOpen', message: 'open' })))).toBe(false);
    expect(neverStarted(new TimeoutFailure('not an activity', undefined, 'SCHEDULE_TO_START'))).toBe(false);
  });
});
